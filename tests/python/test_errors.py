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


def test_an_error_carries_a_reason_unspecified_unless_callers_tell_it_apart():
    with pytest.raises(accgraph.InvalidArgumentError) as info:
        accgraph.Buffer(accgraph.Stream("host"), 0)
    assert info.value.reason == accgraph.ErrorReason.UNSPECIFIED
    prof = accgraph.Profiler()
    stream = accgraph.Stream("host")
    with pytest.raises(accgraph.InvalidStateError, match="no region is open") as info:
        prof.end(stream)
    assert info.value.reason == accgraph.ErrorReason.REGION_ORDER
    graph = accgraph.Graph("host")
    graph.capture_begin(stream)
    with pytest.raises(accgraph.InvalidStateError, match="not attached") as info:
        prof.begin(stream, "late")
    assert info.value.reason == accgraph.ErrorReason.UNATTACHED_CAPTURE
    graph.capture_end()
    assert [r.name for r in accgraph.ErrorReason] == [
        "UNSPECIFIED", "NATIVE_CAPTURE", "UNATTACHED_CAPTURE", "CAPTURE_ENDED", "REGION_ORDER"]


# Audit R07: begin() in a capture, the graph reset mid-capture, then end(): CAPTURE_ENDED, as the
# Region path says (R06), not "no region is open"; a later stray end() is REGION_ORDER again.
def test_end_after_the_capture_was_reset_says_capture_ended():
    prof = accgraph.Profiler()
    stream = accgraph.Stream("host")
    graph = accgraph.Graph("host")
    prof.attach(graph)
    graph.capture_begin(stream)
    prof.begin(stream, "y")
    graph.reset()
    with pytest.raises(accgraph.InvalidStateError,
                       match=r"end: the region open on stream \d+ was begun in a capture that "
                             r"was aborted or reset") as info:
        prof.end(stream)
    assert info.value.reason == accgraph.ErrorReason.CAPTURE_ENDED
    with pytest.raises(accgraph.InvalidStateError, match="no region is open") as info:
        prof.end(stream)
    assert info.value.reason == accgraph.ErrorReason.REGION_ORDER


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


# Note [Integer arguments] (bindings/python/src/common.hpp); audit 2026-11-28 B09, D02, D04, D05:
# an integer out of its C++ type's range was nanobind's "incompatible function arguments" dump of
# the whole signature, naming no argument. Now InvalidArgumentError (also a ValueError) names the
# argument and its range; something that is not an integer is a TypeError naming it.
U64 = "from 0 to 18446744073709551615"
I64 = "from -9223372036854775808 to 9223372036854775807"
I32 = "from -2147483648 to 2147483647"


def integer_calls():
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, 16)
    g = accgraph.Graph("host")
    return [
        # (the call, the message it must raise, as "<what> is <value>: give ... <range>")
        (lambda v: accgraph.Profiler(ring_depth=v), "Profiler: ring_depth", U64),
        (lambda v: accgraph.Profiler(marker_memory=v), "Profiler: marker_memory", U64),
        (lambda v: accgraph.Profiler(keep_reports=v), "Profiler: keep_reports", I64),
        (lambda v: accgraph.Stream("host", v), "Stream: device", I32),
        (lambda v: accgraph.Stream.wrap("host", v, 0), "Stream.wrap: device", I32),
        (lambda v: accgraph.Buffer(s, v), "Buffer: nbytes", I64),
        (lambda v: accgraph.Buffer.allocate(s, v), "Buffer.allocate: nbytes", I64),
        (lambda v: accgraph.Buffer.allocate("host", v, 16), "Buffer.allocate: device", I32),
        (lambda v: s.copy(buf, buf, v), "Stream.copy: nbytes", I64),
        (lambda v: s.fill(buf, 1, v), "Stream.fill: nbytes", I64),
        (lambda v: s.fill(buf, v), "Stream.fill: value", I64),
        (lambda v: accgraph.ClockOffset("host", v, 0), "ClockOffset: device", I32),
        (lambda v: accgraph.ClockOffset("host", 0, v), "ClockOffset: offset_ns", I64),
        (lambda v: accgraph.ClockOffset("host", 0, 0, v), "ClockOffset: uncertainty_ns", U64),
        (lambda v: accgraph.calibrate_clock("host", samples=v), "calibrate_clock: samples", U64),
        (lambda v: accgraph.calibrate_clock("host", v), "calibrate_clock: device", I32),
        (lambda v: accgraph.estimate_clock_offset([(1, 2, 3)], v),
         "estimate_clock_offset: device_resolution_ns", U64),
        (lambda v: accgraph.Profiler().write_trace("t.pftrace", rank=v), "write_trace: rank", I32),
        (lambda v: accgraph.write_trace("t.pftrace", [], world_size=v), "write_trace: world_size",
         I32),
        (lambda v: accgraph.write_trace("t.pftrace", [], host_clock_uncertainty_ns=v),
         "write_trace: host_clock_uncertainty_ns", U64),
        (lambda v: g._replay_loop_ns(v), "Graph._replay_loop_ns: count", U64),
        (lambda v: accgraph.Profiler()._region_loop_ns(s, "r", v),
         "Profiler._region_loop_ns: count", U64),
    ]


@pytest.mark.parametrize("index", range(len(integer_calls())))
def test_an_integer_out_of_range_names_the_argument_and_its_range(index):
    call, what, allowed = integer_calls()[index]
    low, high = (int(x) for x in allowed.split()[1::2])
    for value in (low - 1, high + 1, 2**64, -(2**64)):
        with pytest.raises(accgraph.InvalidArgumentError) as raised:
            call(value)
        message = str(raised.value)
        assert isinstance(raised.value, ValueError)
        assert message == f"[invalid argument] {what} is {value}: give a whole number {allowed}"
        assert "\n" not in message and "incompatible function arguments" not in message
    with pytest.raises(TypeError, match=f"^{what} must be an integer, not float$"):
        call(1.5)


def test_an_integer_argument_takes_what_has_index():
    class Four:
        def __index__(self):
            return 4

    assert accgraph.Profiler(ring_depth=Four(), keep_reports=Four()) is not None
    report_less = accgraph.Profiler(marker_memory=True)  # bool is an int
    assert report_less.delivered == 0
    s = accgraph.Stream("host")
    buf = accgraph.Buffer(s, Four())
    assert buf.nbytes == 4


# audit 2026-11-28 B09: `python -m accgraph.torch --ring -1` printed the multi-line signature dump.
@pytest.mark.parametrize("ring", ["-1", str(2**64)])
def test_the_torch_command_line_refuses_a_ring_out_of_range_in_one_line(tmp_path, ring):
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    result = subprocess.run([sys.executable, "-m", "accgraph.torch", "--ring", ring, str(script)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""  # the script did not run
    assert result.stderr == (f"python -m accgraph.torch: [invalid argument] Profiler: ring_depth "
                             f"is {ring}: give a whole number {U64}\n")


# audit 2026-12-07 R12: after one REGION_ORDER error on a Region's exit (caught, as a server
# catches a failed request), the refused region stayed open and every later region on the stream
# nested in it: 100 regions exited without an error and none was reported. Now the region ended
# out of order is dropped, the error says so, and the stream goes on (Note [Regions out of order]).
def test_a_region_ended_out_of_order_is_dropped_and_later_regions_are_reported():
    prof = accgraph.Profiler()
    s = accgraph.Stream("host")
    a = prof.region(s, "a")
    b = prof.region(s, "b")
    a.__enter__()
    b.__enter__()
    with pytest.raises(accgraph.InvalidStateError) as info:
        a.__exit__(None, None, None)
    assert info.value.reason == accgraph.ErrorReason.REGION_ORDER
    assert (f"region 'a' on stream {s.id} is not the innermost open region: 'a/b' began after "
            "it and is still open, so 'a' is dropped and not reported (the regions that began "
            "inside it still are); end regions in the reverse order they began") in str(info.value)
    assert repr(a) == "<accgraph.Region 'a' open=0>"
    b.__exit__(None, None, None)
    for _ in range(100):
        with prof.region(s, "c"):
            pass
    prof.flush()
    assert sorted((st.path, st.count + st.unmeasurable) for st in prof.stats()) == [
        ("b", 1), ("c", 100)]
    assert [[(r.path, r.depth, r.parent) for r in report] for report in prof.reports()][:1] == [
        [("b", 0, -1)]]
