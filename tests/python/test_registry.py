"""The registry: backends(), default_backend(), load_plugin(), the version."""

import os
import pathlib

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


PLUGIN_PATH_SCRIPT = """
import json
import accgraph
names = [b.name for b in accgraph.backends() if b.available]
print(json.dumps({"available": names, "failures": [[f.path, f.reason] for f in
                                                   accgraph.plugin_failures()]}))
"""


def test_plugin_path_items_that_are_not_plugins_are_each_rejected(tmp_path):
    # audit 2026-11-28 E15 (a text file named .so), E16 (libz.so.1), E17 (/bin/ls), E18 (a
    # directory of 50 random .so files, a symbolic link loop and a FIFO named .so): each
    # rejected with its reason, without hanging, and the built-in backends still work.
    import ctypes.util
    import json
    import random
    import subprocess
    import sys

    fake = tmp_path / "libfake.so"
    fake.write_text("this is not a library\n" * 20)
    libz = next((p for p in (f"{d}/libz.so.1" for d in (
        "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib",
        "/usr/lib")) if os.path.exists(p)), None)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    rng = random.Random(18)
    for i in range(50):
        (plugins / f"librandom{i:02d}.so").write_bytes(rng.randbytes(rng.randrange(1, 16384)))
    os.symlink(plugins / "libloop.so", plugins / "libloop.so")
    os.mkfifo(plugins / "libfifo.so")
    items = [str(fake), "/bin/ls", str(plugins)] + ([libz] if libz else [])
    env = {**os.environ, "ACCGRAPH_PLUGIN_PATH": ":".join(items)}
    done = subprocess.run([sys.executable, "-c", PLUGIN_PATH_SCRIPT], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "host" in result["available"]
    reasons = {pathlib.Path(path).name: reason for path, reason in result["failures"]}
    assert "it is not an ELF shared library" in reasons.pop("libfake.so")
    assert "cannot dynamically load position-independent executable" in reasons.pop("ls")
    if libz:
        assert "it has no entry point 'accgraph_plugin_entry'" in reasons.pop("libz.so.1")
    assert "it is not a regular file" in reasons.pop("libfifo.so")
    assert "Too many levels of symbolic links" in reasons.pop("libloop.so")
    assert sorted(reasons) == [f"librandom{i:02d}.so" for i in range(50)]
    assert all("was rejected" in reason for reason in reasons.values())
