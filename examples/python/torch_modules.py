"""A plain PyTorch script, with nothing of accgraph in it, to time per module with
``python -m accgraph.torch``: a two-block GPT-2-like model (ln_1, attn, ln_2, mlp, residual
adds) run eagerly (--eager N calls), captured into a CUDA graph and replayed; with --decode also
captured at the decode shape (batch 8, sequence 1) into a second graph, replayed as often, as a
serving engine captures one graph per shape.

    python -m accgraph.torch [--depth N] [--csv FILE] [--html FILE] \
        examples/python/torch_modules.py [--replays N] [--blocks N] [--eager N] [--decode]

prints, after the script's own output, the per-module table: GPT, GPT/h.0, GPT/h.0/attn,
GPT/h.0/attn/c_attn, ... (count, p50, p95, self p50 in microseconds). Run on its own it is just
the model. Without torch or a GPU it says why and exits 0.
"""

from __future__ import annotations

import argparse
import sys

try:
    import torch
except ImportError as e:
    print(f"torch_modules.py: PyTorch cannot be imported ({e}); run it where PyTorch with a CUDA "
          "device is: python -m accgraph.torch examples/python/torch_modules.py")
    sys.exit(0)

D_MODEL, HEADS = 768, 12


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(D_MODEL, 3 * D_MODEL)
        self.c_proj = torch.nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(D_MODEL, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc = torch.nn.Linear(D_MODEL, 4 * D_MODEL)
        self.gelu = torch.nn.GELU(approximate="tanh")
        self.c_proj = torch.nn.Linear(4 * D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(D_MODEL)
        self.attn = Attention()
        self.ln_2 = torch.nn.LayerNorm(D_MODEL)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.h = torch.nn.ModuleList([Block() for _ in range(blocks)])
        self.ln_f = torch.nn.LayerNorm(D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--eager", type=int, default=1, help="eager calls before the capture")
    parser.add_argument("--decode", action="store_true",
                        help="also a graph of the decode shape (batch --batch, sequence 1)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"torch_modules.py: PyTorch {torch.__version__} sees no CUDA device; run it where "
              "one is")
        return 0
    model = GPT(args.blocks).to(device="cuda", dtype=torch.bfloat16).eval()
    x = torch.randn(args.batch, args.seq, D_MODEL, device="cuda", dtype=torch.bfloat16)
    shapes = [x] + ([x[:, -1:].contiguous()] if args.decode else [])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(args.eager):
            eager = model(x)  # eager (warm-up)
        for z in shapes[1:]:
            model(z)  # the decode shape's warm-up (an eager call of another shape)
    torch.cuda.current_stream().wait_stream(side)
    graphs, outputs = [], []
    for z in shapes:
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            outputs.append(model(z))
        graphs.append(graph)
    for _ in range(args.replays):
        for graph in graphs:
            graph.replay()
    torch.cuda.synchronize()
    y = outputs[0]
    print(f"torch_modules.py: {args.replays} replays; max |graph - eager| = "
          f"{(y.float() - eager.float()).abs().max().item():.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
