"""The exception hierarchy: one class per error code, each deriving from the matching built-in,
with the C++ message, code, backend and native call as attributes."""

import pytest

import accgraph


@pytest.mark.parametrize(
    "cls, builtin, code",
    [
        (accgraph.InvalidArgumentError, ValueError, accgraph.ErrorCode.INVALID_ARGUMENT),
        (accgraph.InvalidStateError, RuntimeError, accgraph.ErrorCode.INVALID_STATE),
        (accgraph.UnavailableError, RuntimeError, accgraph.ErrorCode.UNAVAILABLE),
        (accgraph.UnsupportedError, NotImplementedError, accgraph.ErrorCode.UNSUPPORTED),
        (accgraph.BackendError, RuntimeError, accgraph.ErrorCode.BACKEND_ERROR),
        (accgraph.PluginError, ImportError, accgraph.ErrorCode.PLUGIN_ERROR),
    ],
)
def test_each_class_derives_from_error_and_its_builtin(cls, builtin, code):
    assert issubclass(cls, accgraph.Error)
    assert issubclass(cls, builtin)
    e = cls("[x] y: z", code=code, message="z", backend="y")
    assert (str(e), e.code, e.message, e.backend) == ("[x] y: z", code, "z", "y")


def test_invalid_argument_carries_code_message_and_backend():
    with pytest.raises(accgraph.InvalidArgumentError) as info:
        accgraph.Buffer(accgraph.Stream("host"), 0)
    e = info.value
    assert e.code == accgraph.ErrorCode.INVALID_ARGUMENT
    assert e.backend == "host"
    assert "0 bytes" in e.message
    assert str(e).startswith("[invalid argument] host: ")
    assert str(e).endswith(e.message)
    assert e.native_call == "" and e.native_code == ""


def test_a_core_error_has_no_backend():
    with pytest.raises(accgraph.InvalidArgumentError, match="device 7 does not exist") as info:
        accgraph.Stream("host", device=7)
    assert info.value.backend == ""


def test_unknown_backend_lists_the_registered_ones():
    with pytest.raises(accgraph.InvalidArgumentError, match="(?s)unknown backend 'no_such'.*host"):
        accgraph.Graph("no_such")


def test_invalid_state_is_a_runtime_error():
    g = accgraph.Graph("host")
    with pytest.raises(RuntimeError, match=r"capture_end: graph \d+ is not capturing") as info:
        g.capture_end()
    assert isinstance(info.value, accgraph.InvalidStateError)
    assert info.value.code == accgraph.ErrorCode.INVALID_STATE


def test_plugin_error_names_the_file(tmp_path):
    bad = tmp_path / "libnot_a_plugin.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(accgraph.PluginError, match="libnot_a_plugin.so") as info:
        accgraph.load_plugin(bad)
    assert isinstance(info.value, ImportError)
    assert any(str(bad) in f.path for f in accgraph.plugin_failures())


def test_a_missing_plugin_file_is_a_plugin_error(tmp_path):
    with pytest.raises(accgraph.PluginError, match="missing.so"):
        accgraph.load_plugin(str(tmp_path / "missing.so"))
