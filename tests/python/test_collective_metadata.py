"""accgraph.torch.collective_metadata: the fields eager NCCL traces show, from a collective's
arguments. Runs without PyTorch: accgraph.torch's torch loader is given a stand-in torch whose
`distributed` has the few functions the helper calls, and the tensors are stand-ins with numel()
and dtype (as test_torch_standin.py gives accgraph.torch its stand-in)."""

import sys
import types

import pytest

import accgraph
import accgraph.torch


class Tensor:
    """What collective_metadata reads of a tensor: numel() and dtype (printed "torch.<name>")."""

    def __init__(self, numel, dtype="float32"):
        self._numel = numel
        self.dtype = _Dtype(dtype)

    def numel(self):
        return self._numel


class _Dtype:
    """A torch.dtype: str() is "torch.float32"."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class Group:
    """A process group: its global ranks, and a group_name where torch gave it one."""

    def __init__(self, ranks, group_name=None):
        self.ranks = ranks
        if group_name is not None:
            self.group_name = group_name


def make_distributed(world_size=4, default_ranks_listed=True):
    """A stand-in torch.distributed, initialised, `world_size` ranks in the default group.
    `default_ranks_listed=False`: get_process_group_ranks(None) raises, as older PyTorch does."""
    d = types.ModuleType("torch.distributed")
    d.initialized = True
    d.is_available = lambda: True
    d.is_initialized = lambda: d.initialized
    d.calls = []

    def get_world_size(group=None):
        d.calls.append(("get_world_size", group))
        if group is None:
            return world_size
        return len(group.ranks) if d.this_rank in group.ranks else -1

    def get_process_group_ranks(group):
        d.calls.append(("get_process_group_ranks", group))
        if group is None:
            if not default_ranks_listed:
                raise KeyError(None)  # older PyTorch: pg_group_ranks[None]
            return list(range(world_size))
        return list(group.ranks)

    d.this_rank = 1
    d.get_world_size = get_world_size
    d.get_process_group_ranks = get_process_group_ranks
    return d


@pytest.fixture
def dist(monkeypatch):
    """The stand-in torch.distributed, reached through accgraph.torch's torch loader."""
    d = make_distributed()
    torch = types.SimpleNamespace(__version__="0.0+standin", distributed=d)
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch", lambda: torch)
    return d


EXPECTED_DEFAULT = {
    "collective": "all_reduce",
    "In msg nelems": 1048576,
    "Out msg nelems": 1048576,
    "dtype": "float32",
    "Group size": 4,
    "Process Group Name": "default",
    "Process Group Ranks": "[0, 1, 2, 3]",
}


def test_default_group_in_place(dist):
    md = accgraph.torch.collective_metadata("all_reduce", Tensor(1 << 20))
    assert md == EXPECTED_DEFAULT
    assert list(md) == list(EXPECTED_DEFAULT)  # the tutorial's order
    assert type(md["In msg nelems"]) is int and type(md["Group size"]) is int
    assert ("get_world_size", None) in dist.calls
    assert ("get_process_group_ranks", None) in dist.calls


def test_default_group_where_torch_cannot_list_it(monkeypatch):
    d = make_distributed(world_size=3, default_ranks_listed=False)
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch",
                        lambda: types.SimpleNamespace(__version__="0", distributed=d))
    md = accgraph.torch.collective_metadata("all_reduce", Tensor(5))
    assert (md["Group size"], md["Process Group Ranks"]) == (3, "[0, 1, 2]")


def test_output_given(dist):
    md = accgraph.torch.collective_metadata("all_gather_into_tensor", Tensor(10, "bfloat16"),
                                            Tensor(40, "bfloat16"))
    assert md == {**EXPECTED_DEFAULT, "collective": "all_gather_into_tensor",
                  "In msg nelems": 10, "Out msg nelems": 40, "dtype": "bfloat16"}


def test_explicit_group_with_a_name(dist):
    group = Group([1, 3], group_name="tp")
    md = accgraph.torch.collective_metadata("reduce_scatter", Tensor(20, "float16"), Tensor(10),
                                            group=group)
    assert md == {
        "collective": "reduce_scatter",
        "In msg nelems": 20,
        "Out msg nelems": 10,
        "dtype": "float16",
        "Group size": 2,
        "Process Group Name": "tp",
        "Process Group Ranks": "[1, 3]",
    }
    assert ("get_world_size", group) in dist.calls
    # The argument wins over the group's name; a group without one is "default".
    named = accgraph.torch.collective_metadata("broadcast", Tensor(1), group=group,
                                               group_name="mine")
    assert named["Process Group Name"] == "mine"
    unnamed = accgraph.torch.collective_metadata("broadcast", Tensor(1), group=Group([0, 1, 2]))
    assert (unnamed["Process Group Name"], unnamed["Group size"],
            unnamed["Process Group Ranks"]) == ("default", 3, "[0, 1, 2]")


def test_a_group_this_rank_is_not_in(dist):
    with pytest.raises(accgraph.InvalidArgumentError, match="not a member of group"):
        accgraph.torch.collective_metadata("all_reduce", Tensor(1), group=Group([0, 2]))


def test_metadata_reaches_a_region_as_text(dist):
    stream = accgraph.Stream("host")
    prof = accgraph.Profiler()
    md = accgraph.torch.collective_metadata("all_reduce", Tensor(8))
    with prof.region(stream, "all_reduce", lane="comm", **md):
        pass
    prof.flush()
    (region,) = prof.reports()[0]  # str() of every value; a .pftrace types them back
    assert region.lane == "comm"
    assert region.metadata == {"collective": "all_reduce", "In msg nelems": "8",
                               "Out msg nelems": "8", "dtype": "float32", "Group size": "4",
                               "Process Group Name": "default",
                               "Process Group Ranks": "[0, 1, 2, 3]"}


def test_uninitialised_distributed_is_an_error(dist):
    dist.initialized = False
    with pytest.raises(accgraph.InvalidStateError,
                       match=r"torch.distributed is not initialised: call "
                             r"torch.distributed.init_process_group\(\) first") as raised:
        accgraph.torch.collective_metadata("all_reduce", Tensor(1))
    assert raised.value.code == accgraph.ErrorCode.INVALID_STATE
    assert isinstance(raised.value, RuntimeError)


def test_torch_without_distributed(monkeypatch):
    d = make_distributed()
    d.is_available = lambda: False
    monkeypatch.setattr(accgraph.torch._runtime, "load_torch",
                        lambda: types.SimpleNamespace(__version__="9.9", distributed=d))
    with pytest.raises(accgraph.torch.TorchUnavailableError,
                       match=r"PyTorch 9.9 was built without torch.distributed"):
        accgraph.torch.collective_metadata("all_reduce", Tensor(1))


def test_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(accgraph.torch.TorchUnavailableError, match="PyTorch cannot be imported"):
        accgraph.torch.collective_metadata("all_reduce", Tensor(1))


def test_bad_collective_name(dist):
    with pytest.raises(TypeError, match="non-empty str"):
        accgraph.torch.collective_metadata("", Tensor(1))
    with pytest.raises(TypeError, match="non-empty str"):
        accgraph.torch.collective_metadata(None, Tensor(1))


def test_it_lives_in_the_torch_package_and_torch_re_exports_it():
    from accgraph.torch import _distributed, collective_metadata

    assert collective_metadata is _distributed.collective_metadata
    assert accgraph.torch.collective_metadata is collective_metadata
    assert accgraph.torch.measure_host_clock_offset is _distributed.measure_host_clock_offset
    assert {"collective_metadata", "measure_host_clock_offset"} <= set(accgraph.torch.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        accgraph.torch.no_such_name


@pytest.mark.parametrize("first", ["accgraph.torch._distributed", "accgraph.torch"])
def test_either_module_imports_first_without_importing_torch(first):
    # A fresh interpreter: either import order works (no cycle: Note [One torch package]), and
    # neither imports torch.
    import subprocess

    code = (f"import sys, {first}, accgraph.torch, accgraph.torch._distributed\n"
            "assert accgraph.torch.collective_metadata is "
            "accgraph.torch._distributed.collective_metadata\n"
            "assert 'torch' not in sys.modules and 'torch.distributed' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
