"""A stand-in for the few parts of PyTorch that tests/python/multihost_skew_torch.py and
accgraph.torch.measure_host_clock_offset use, so that they run where PyTorch is
not installed (CI): one-element int64 "tensors" on the CPU and a torch.distributed of
point-to-point send/recv over loopback TCP sockets (torch/distributed/__init__.py). Not PyTorch:
the real Gloo/NCCL path runs where torch is installed (gpu-check's nccl stage)."""

__version__ = "0.0-standin"
int64 = "int64"


class _Version:
    cuda = None


version = _Version()


class Tensor:
    def __init__(self, value=0):
        self.value = int(value)

    def fill_(self, value):
        self.value = int(value)
        return self

    def item(self):
        return self.value


def zeros(n, dtype=None, device=None):
    if n != 1 or device not in (None, "cpu"):
        raise NotImplementedError("the stand-in torch has one-element CPU tensors only")
    return Tensor(0)


class _Cuda:
    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0


cuda = _Cuda()

from . import distributed  # noqa: E402,F401
