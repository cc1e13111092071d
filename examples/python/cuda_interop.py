"""accgraph next to PyTorch on CUDA: replay an accgraph graph on PyTorch's current stream and
let torch read accgraph memory through DLPack. Needs a GPU and torch; says so otherwise.

    python examples/python/cuda_interop.py [--standin]

--standin runs the same calls on accgraph's host backend with the torch stand-in of
tests/python/torch_standin.py (a stream and from_dlpack, no memory read), as CI does.
"""

import pathlib
import sys

import accgraph


def main() -> int:
    backend = "cuda"
    if "--standin" in sys.argv[1:]:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "python"))
        import torch_standin

        torch_standin.install()
        backend = "host"
    try:
        import torch
    except ImportError:
        print("cuda_interop: torch is not installed; nothing to show")
        return 0
    cuda = {i.name: i for i in accgraph.backends()}.get(backend)
    if cuda is None or not cuda.available or not torch.cuda.is_available():
        print(f"cuda_interop: no usable GPU ({cuda.reason if cuda else 'no cuda backend'})")
        return 0

    torch_stream = torch.cuda.Stream()
    stream = accgraph.Stream.wrap(backend, 0, torch_stream)  # keeps torch_stream alive
    buf = accgraph.Buffer(stream, 1024)
    capture = accgraph.Stream(backend)
    g = accgraph.Graph(backend)
    with g.capture(capture):
        capture.fill(buf, 7)
    g.replay(stream)  # on torch's stream
    stream.synchronize()
    t = torch.from_dlpack(buf)  # a uint8 CUDA tensor over the same memory
    print(f"torch sees {t[:4].tolist()} on {t.device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
