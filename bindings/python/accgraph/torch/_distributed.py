"""Region metadata for ``torch.distributed`` collectives: the fields PyTorch's profiler shows for
a collective in an eager trace, for a region around one captured into a CUDA graph (where a
profiler sees only a kernel)::

    md = accgraph.torch.collective_metadata("all_reduce", tensor)
    with torch.cuda.graph(g):
        with prof.region("all_reduce", lane="comm", **md):
            dist.all_reduce(tensor)

And host clock offsets for ranks on several hosts, measured over the job's own process group
(:func:`measure_host_clock_offset`, at profiling start and again at flush)::

    start = accgraph.torch.measure_host_clock_offset()
    ...  # the timed work
    prof.flush()
    end = accgraph.torch.measure_host_clock_offset()
    prof.write_trace(f"rank{rank}.pftrace", rank=rank, world_size=world, host=socket.gethostname(),
                     clocks=[clock], host_clock_offsets=[start, end])

Both are re-exported by :mod:`accgraph.torch` (``accgraph.torch_distributed``, their old home,
still re-exports them until 0.3, with a DeprecationWarning). Importing this module imports
neither torch nor torch.distributed: the functions do, through the torch loader of _runtime.py.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .._errors import InvalidArgumentError, InvalidStateError, make_error
from . import _runtime
from ._runtime import TorchUnavailableError

__all__ = ["collective_metadata", "measure_host_clock_offset"]

_WHAT = "accgraph.torch.collective_metadata"


def _distributed(what: str = _WHAT, torch: Any = None) -> Any:
    """torch.distributed, initialised: TorchUnavailableError (PyTorch, a GPU or distributed
    support missing) or InvalidStateError (no process group yet) otherwise. With `torch` given,
    that module is used (no GPU needed)."""
    if torch is None:
        torch = _runtime.load_torch()
    dist = getattr(torch, "distributed", None)
    if dist is None:
        try:
            import torch.distributed as dist
        except ImportError as e:
            raise make_error(
                TorchUnavailableError,
                f"{what}: torch.distributed cannot be imported ({e}): install a PyTorch built "
                "with distributed support",
            ) from e
    if not dist.is_available():
        raise make_error(
            TorchUnavailableError,
            f"{what}: PyTorch {torch.__version__} was built without torch.distributed: "
            "install a PyTorch built with distributed support",
        )
    if not dist.is_initialized():
        raise make_error(
            InvalidStateError,
            f"{what}: torch.distributed is not initialised: call "
            "torch.distributed.init_process_group() first",
        )
    return dist


def _group_size_and_ranks(dist: Any, group: Any) -> Tuple[int, List[int]]:
    """The size and the global ranks of `group` (None: the default group).
    InvalidArgumentError when this rank is not a member."""
    size = int(dist.get_world_size(group))
    if size < 1:  # torch answers -1 on a rank outside the group
        raise make_error(InvalidArgumentError,
                         f"{_WHAT}: this rank is not a member of group {group!r}")
    try:
        return size, [int(r) for r in dist.get_process_group_ranks(group)]
    except (AttributeError, KeyError, RuntimeError, TypeError, ValueError):
        if group is not None:
            raise
        return size, list(range(size))  # a PyTorch that does not list the default group


def _group_name(group: Any) -> str:
    """The group's own name, else "default"."""
    try:
        name = getattr(group, "group_name", None) if group is not None else None
    except RuntimeError:  # a group torch has not named
        name = None
    return name or "default"


def collective_metadata(collective: str, input: Any, output: Any = None, *, group: Any = None,
                        group_name: Optional[str] = None) -> Dict[str, Any]:
    """The metadata eager traces show for a ``torch.distributed`` collective (PyTorch profiler's
    field names), for a region around a collective captured into a CUDA graph, where a profiler
    sees only a kernel::

        dist.init_process_group("nccl")
        tensor = torch.ones(1 << 20, device="cuda")
        md = accgraph.torch.collective_metadata("all_reduce", tensor)
        # {"collective": "all_reduce", "In msg nelems": 1048576, "Out msg nelems": 1048576,
        #  "dtype": "float32", "Group size": 2, "Process Group Name": "default",
        #  "Process Group Ranks": "[0, 1]"}
        with torch.cuda.graph(g):
            with prof.region("all_reduce", lane="comm", **md):
                dist.all_reduce(tensor)

    Keys: ``collective`` (as given), ``In msg nelems`` (``input.numel()``), ``Out msg nelems``
    (``output.numel()``, the input's when `output` is None, as for an in-place collective),
    ``dtype`` (``str(input.dtype)`` without ``"torch."``), ``Group size``
    (``get_world_size(group)``), ``Process Group Name`` (`group_name`, else the group's
    ``group_name``, else ``"default"``) and ``Process Group Ranks`` (the global ranks of
    `group`, ``"[0, 1]"``; for the default group ``range(world_size)`` where torch cannot list
    them). `group` None is the default group. The numbers are ints; the region shows every value
    with str(), and a native Perfetto trace (``*.pftrace``) writes the numbers as ints and the
    rank list as a list of ints (Note [Typed annotations] in timing/export/perfetto/annotations.hpp).

    InvalidStateError when torch.distributed is not initialised (call
    ``torch.distributed.init_process_group`` first); InvalidArgumentError when this rank is not
    a member of `group`; TorchUnavailableError without PyTorch, a GPU, or torch.distributed.
    """
    if not isinstance(collective, str) or not collective:
        raise TypeError(f"{_WHAT}: collective must be a non-empty str, e.g. \"all_reduce\"")
    dist = _distributed()
    size, ranks = _group_size_and_ranks(dist, group)
    if group_name is None:
        group_name = _group_name(group)
    out = input if output is None else output
    return {
        "collective": collective,
        "In msg nelems": int(input.numel()),
        "Out msg nelems": int(out.numel()),
        "dtype": str(input.dtype).replace("torch.", "", 1),
        "Group size": size,
        "Process Group Name": str(group_name),
        "Process Group Ranks": "[" + ", ".join(str(r) for r in ranks) + "]",
    }


_MEASURE = "accgraph.torch.measure_host_clock_offset"
_TWO_64 = 1 << 64


def measure_host_clock_offset(*, group: Any = None, rounds: int = 64,
                              device: Any = None) -> Any:
    """This host's clock offset against the host of the group's first rank (rank 0 of the
    default group), measured over the job's own process group (Gloo or NCCL): a ping-pong of
    host timestamps with ``torch.distributed.send``/``recv`` of one int64 tensor, through
    :func:`accgraph.measure_host_clock_offset` (Note [Host clock offsets]; the shortest round
    trip wins, uncertainty = half of it plus the clock's resolution). Collective: every rank of
    `group` calls it. Returns an :class:`accgraph.HostClockOffset`; the first rank's is 0 +- 0.

    Call it when profiling starts and again at flush, and give both to
    ``write_trace(..., host_clock_offsets=[start, end])``; the merge interpolates the drift
    between them. `device`: where the tensors live, default ``"cuda"`` (the current device) for
    an NCCL group, else ``"cpu"``. Costs `rounds` round trips per rank, each tens of
    microseconds over Gloo; rank 0 serves the ranks one after another.

    InvalidStateError when torch.distributed is not initialised; InvalidArgumentError when this
    rank is not a member of `group`; TorchUnavailableError without PyTorch or torch.distributed.
    """
    import accgraph

    try:  # no GPU needed: a CPU job on Gloo measures its hosts too
        import torch
    except ImportError as e:
        raise make_error(
            TorchUnavailableError,
            f"{_MEASURE}: PyTorch cannot be imported ({e}): install PyTorch (pip install torch)",
        ) from e
    dist = _distributed(_MEASURE, torch)
    size, ranks = _group_size_and_ranks(dist, group)
    me = int(dist.get_rank(group))
    if device is None:
        backend = str(dist.get_backend(group)).lower()
        device = "cuda" if "nccl" in backend else "cpu"
    buffer = torch.zeros(1, dtype=torch.int64, device=device)

    def send(peer: int, value: int) -> None:
        buffer.fill_(value - _TWO_64 if value >= 1 << 63 else value)
        dist.send(buffer, dst=ranks[peer], group=group)

    def receive(peer: int) -> int:
        dist.recv(buffer, src=ranks[peer], group=group)
        return int(buffer.item()) % _TWO_64

    # On this thread (timeout=None): the process group's own timeout bounds send and recv,
    # and a CUDA tensor's stream and device are this thread's.
    return accgraph.measure_host_clock_offset(me, size, send, receive, rounds, timeout=None)
