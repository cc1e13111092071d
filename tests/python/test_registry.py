"""The registry: backends(), default_backend(), load_plugin(), the version."""

import os

import pytest

import accgraph
from conftest import require_backend


def test_backends_lists_host_available_with_its_capabilities():
    by_name = {info.name: info for info in accgraph.backends()}
    host = by_name["host"]
    assert host.available and host.reason == ""
    assert host.origin == "built-in"
    assert [d.index for d in host.devices] == [0]
    assert host.capabilities.host_calls
    assert host.capabilities.supports(accgraph.CaptureMode.GLOBAL)
    assert "steady_clock" in host.capabilities.marker_strategies
    assert "BackendInfo(name='host'" in repr(host)


def test_backends_are_sorted_by_priority():
    priorities = [info.priority for info in accgraph.backends()]
    assert priorities == sorted(priorities, reverse=True)


def test_an_unavailable_backend_says_why():
    for info in accgraph.backends():
        if not info.available:
            assert info.reason, info.name
            assert info.devices == []


def test_level_zero_runs_through_the_cpu_driver():
    require_backend("level_zero")
    info = {i.name: i for i in accgraph.backends()}["level_zero"]
    assert info.origin.startswith("built-in module ")
    assert "/accgraph/libaccgraph_backend_level_zero.so" in info.origin


def test_default_backend_is_available():
    name = accgraph.default_backend()
    assert {i.name: i for i in accgraph.backends()}[name].available


def test_toy_plugin_is_registered_from_load_plugin():
    require_backend("toy")
    info = {i.name: i for i in accgraph.backends()}["toy"]
    assert info.origin.startswith("plugin ")
    assert info.available


def test_loading_the_same_plugin_twice_is_a_plugin_error():
    require_backend("toy")
    with pytest.raises(accgraph.PluginError, match="toy"):
        accgraph.load_plugin(os.environ["ACCGRAPH_TEST_TOY_PLUGIN"])


def test_load_plugin_rejects_a_non_path():
    with pytest.raises(TypeError):
        accgraph.load_plugin(42)


def test_version_matches_the_library():
    major, minor, patch = accgraph.library_version()
    assert accgraph.__version__ == f"{major}.{minor}.{patch}"
