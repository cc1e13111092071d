// Traces in the format the file name asks for (accgraph/trace_file.hpp: Chrome JSON, native
// Perfetto, speedscope), Chrome trace events as a Perfetto trace (annotate_trace's .pftrace), the
// merge of several ranks' Perfetto traces (accgraph/perfetto.hpp), and device clock offsets
// (accgraph/clock.hpp). The Perfetto half needs accgraph::perfetto (libprotobuf); a package
// built without it raises UnsupportedError from those calls and says how to get them.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string_view>
#include <tuple>

#include <accgraph/output_file.hpp>
#include <accgraph/perfetto.hpp>
#include <accgraph/trace_file.hpp>

#include "common.hpp"

namespace accgraph::python {

namespace {

using timing::DeviceClockOffset;
using timing::HostClockOffset;
using timing::MergedRank;
using timing::MergeSummary;

constexpr bool kWithPerfetto = ACCGRAPH_PYTHON_WITH_PERFETTO != 0;

void require_perfetto(const std::string& what) {
  if (!kWithPerfetto)
    throw Error(ErrorCode::Unsupported,
                what +
                    ": this accgraph package was built without Perfetto support "
                    "(libprotobuf-dev and protobuf-compiler were missing when it was "
                    "built): install them (scripts/ensure-packages.sh) and reinstall it "
                    "(pip install .), or write a Chrome trace (.json) instead");
}

// What a Python receive() of measure_host_clock_offset returned, as the uint64 it must be: a
// TypeError naming receive for what is not an int (a callback without `return` gives None), an
// InvalidArgumentError naming the range for an int outside 0..2**64-1 (a signed transport).
uint64_t received_value(const nb::object& value, int peer) {
  PyObject* index = PyFloat_Check(value.ptr()) ? nullptr : PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    std::string shown = nb::repr(value).c_str();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    const std::string p = std::to_string(peer);
    throw nb::type_error(("measure_host_clock_offset: receive(" + p + ") returned " + shown + " (" +
                          Py_TYPE(value.ptr())->tp_name +
                          "), not an int: it must return the int (0 to 2**64-1) that rank " + p +
                          " gave send (did it forget `return`?)")
                             .c_str());
  }
  const auto number = nb::steal<nb::int_>(index);
  if (!detail::int_within(number, nb::int_(0), nb::int_(std::numeric_limits<uint64_t>::max())))
    throw Error(ErrorCode::InvalidArgument,
                "measure_host_clock_offset: receive(" + std::to_string(peer) + ") returned " +
                    nb::str(number).c_str() +
                    ", outside 0 to 2**64-1: return exactly the int send was given (a transport "
                    "of signed 64-bit ints: return value % 2**64)");
  return nb::cast<uint64_t>(number);
}

nb::dict clock_dict(const DeviceClockOffset& c) {
  return dict_of(field("backend", c.backend), field("device", c.device),
                 field("offset_ns", c.offset_ns), field("uncertainty_ns", c.uncertainty_ns));
}

nb::dict host_offset_dict(const HostClockOffset& h) {
  return dict_of(field("offset_ns", h.offset_ns), field("uncertainty_ns", h.uncertainty_ns),
                 field("measured_at_ns", h.measured_at_ns));
}

nb::dict rank_dict(const MergedRank& r) {
  return dict_of(field("path", r.path), field("rank", r.rank), field("host", r.host),
                 field("host_clock_uncertainty_ns", r.host_clock_uncertainty_ns),
                 field("host_clock_offsets", list_of(r.host_clock_offsets, host_offset_dict)),
                 field("host_clock_drift_ns", r.host_clock_drift_ns),
                 field("clocks", list_of(r.clocks, clock_dict)),
                 field("uncalibrated", r.uncalibrated), field("packets", r.packets));
}

nb::dict summary_dict(const MergeSummary& s) {
  return dict_of(field("world_size", s.world_size), field("ranks", list_of(s.ranks, rank_dict)),
                 field("alignment_uncertainty_ns", s.alignment_uncertainty_ns),
                 field("warnings", s.warnings));
}

// OSError(errno, message, file): Python picks the subclass (FileNotFoundError, ...) by errno.
[[noreturn]] void raise_os_error(const timing::FileError& e) {
  const std::string& message = e.message();
  nb::object text = nb::steal(
      PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace"));
  nb::object file = nb::steal(PyUnicode_DecodeFSDefault(e.path().c_str()));
  if (!text.is_valid() || !file.is_valid()) throw nb::python_error();
  nb::object args = nb::make_tuple(e.error_number(), text, file);
  PyErr_SetObject(PyExc_OSError, args.ptr());
  throw nb::python_error();
}

// Runs `call` with the GIL released; a FileError it throws becomes OSError, any other error
// passes through.
void with_file_errors(const std::function<void()>& call) {
  std::optional<timing::FileError> failure;
  {
    GilRelease release;
    try {
      call();
    } catch (const timing::FileError& e) {
      failure = e;
    }
  }
  if (failure) raise_os_error(*failure);
}

}  // namespace

void write_output(const std::string& file, const char* what,
                  const std::function<void(std::ostream&)>& write) {
  with_file_errors([&] { timing::write_output_file(file, what, write); });
}

void write_trace_file(nb::handle path, const std::vector<timing::ReplayReport>& reports,
                      const IntArg& rank_arg, const IntArg& world_size_arg, const std::string& host,
                      const IntArg& uncertainty_arg,
                      const std::vector<timing::DeviceClockOffset>& clocks,
                      const std::vector<timing::HostClockOffset>& host_clock_offsets) {
  const int rank = int_arg<int>(rank_arg, "write_trace: rank");
  const int world_size = int_arg<int>(world_size_arg, "write_trace: world_size");
  const auto host_clock_uncertainty_ns =
      int_arg<uint64_t>(uncertainty_arg, "write_trace: host_clock_uncertainty_ns");
  timing::PerfettoOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.host = host;
  options.host_clock_uncertainty_ns = host_clock_uncertainty_ns;
  options.clocks = clocks;
  options.host_clock_offsets = host_clock_offsets;
  const std::string file = fs_path(path);
  with_file_errors([&] { timing::write_trace_file(file, reports, options); });
}

namespace {

// (phase, name, category, pid, tid, ts_ns, dur_ns, args): a TraceEvent as Python gives it, args
// as (name, value, is_text).
using EventTuple =
    std::tuple<std::string, std::string, std::string, std::string, std::string, uint64_t, uint64_t,
               std::vector<std::tuple<std::string, std::string, bool>>>;

void write_events_file(nb::handle path, const std::vector<EventTuple>& tuples) {
  const std::string file = fs_path(path);
  require_perfetto("annotate_trace('" + file + "')");
#if ACCGRAPH_PYTHON_WITH_PERFETTO
  std::vector<timing::TraceEvent> events(tuples.size());
  for (size_t i = 0; i < tuples.size(); ++i) {
    const auto& [phase, name, category, pid, tid, ts_ns, dur_ns, args] = tuples[i];
    if (phase.size() != 1)
      throw Error(ErrorCode::InvalidArgument, "write_perfetto_events: event " + std::to_string(i) +
                                                  " has phase '" + phase +
                                                  "': give one character ('X', 'i', 'I' or 'M')");
    timing::TraceEvent& e = events[i];
    e.phase = phase[0];
    e.name = name;
    e.category = category;
    e.pid = pid;
    e.tid = tid;
    e.ts_ns = ts_ns;
    e.dur_ns = dur_ns;
    for (const auto& [arg, value, is_text] : args)
      e.args.push_back(timing::TraceEventArg{arg, value, is_text});
  }
  write_output(file, "the Perfetto trace",
               [&](std::ostream& out) { timing::write_perfetto_events(out, events); });
#else
  (void)tuples;
#endif
}

// ClockOffset: one device clock against the host's reference clock.
void bind_clock_offset_class(nb::module_& m) {
  nb::class_<DeviceClockOffset>(
      m, "ClockOffset",
      "One device clock against the host's reference clock: host_time = device_time - "
      "offset_ns, true to within +-uncertainty_ns (accgraph::timing::DeviceClockOffset).")
      .def(
          "__init__",
          [](DeviceClockOffset* self, std::string backend, IntArg device, IntArg offset_ns,
             IntArg uncertainty_ns) {
            new (self)
                DeviceClockOffset{std::move(backend), int_arg<int>(device, "ClockOffset: device"),
                                  int_arg<int64_t>(offset_ns, "ClockOffset: offset_ns"),
                                  int_arg<uint64_t>(uncertainty_ns, "ClockOffset: uncertainty_ns")};
          },
          nb::arg("backend"), nb::arg("device"), nb::arg("offset_ns"),
          nb::arg("uncertainty_ns") = 0,
          "`backend` and `device` name the device as its reports do (ReplayReport.backend, "
          ".device).")
      .def_ro("backend", &DeviceClockOffset::backend, "The backend's name.")
      .def_ro("device", &DeviceClockOffset::device, "The device index.")
      .def_ro("offset_ns", &DeviceClockOffset::offset_ns,
              "Device clock minus host clock, in nanoseconds.")
      .def_ro("uncertainty_ns", &DeviceClockOffset::uncertainty_ns,
              "How far offset_ns may be from the truth, in nanoseconds.")
      .def("to_dict", &clock_dict, "The attributes as a dict.")
      .def("__repr__", [](const DeviceClockOffset& c) {
        return "<accgraph.ClockOffset " + c.backend + " device " + std::to_string(c.device) +
               " offset " + std::to_string(c.offset_ns) + " ns +- " +
               std::to_string(c.uncertainty_ns) + " ns>";
      });
}

// Whether Perfetto traces are supported, ClockOffset and estimate_clock_offset.
void bind_clock_offsets(nb::module_& m) {
  m.def(
      "perfetto_supported", [] { return kWithPerfetto; },
      "Whether this package writes and merges native Perfetto traces (*.pftrace): it was built "
      "with libprotobuf. Without it those calls raise UnsupportedError; Chrome JSON always "
      "works.");

  bind_clock_offset_class(m);

  m.def(
      "estimate_clock_offset",
      [](const std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>& samples,
         IntArg device_resolution_ns_arg, std::string backend, IntArg device_arg) {
        const auto device_resolution_ns = int_arg<uint64_t>(
            device_resolution_ns_arg, "estimate_clock_offset: device_resolution_ns");
        const int device = int_arg<int>(device_arg, "estimate_clock_offset: device");
        std::vector<timing::ClockSample> converted;
        converted.reserve(samples.size());
        for (const auto& [before, device_ns, after] : samples)
          converted.push_back({before, device_ns, after});
        DeviceClockOffset offset = timing::estimate_clock_offset(converted, device_resolution_ns);
        offset.backend = std::move(backend);
        offset.device = device;
        return offset;
      },
      nb::arg("samples"), nb::arg("device_resolution_ns") = 0, nb::kw_only(),
      nb::arg("backend") = "", nb::arg("device") = 0,
      "The offset of a device clock from samples (host_before_ns, device_ns, host_after_ns), "
      "each a device clock read between two CLOCK_REALTIME reads: the sample with the shortest "
      "round trip wins (offset = device - midpoint, uncertainty = half the round trip plus "
      "`device_resolution_ns`). InvalidArgumentError for no samples or a sample whose host "
      "times go backwards. calibrate_clock() takes the samples itself.");
}

// HostClockOffset, measure_host_clock_offset and host_clock_ns (accgraph/host_clock.hpp).
void bind_host_clock_offsets(nb::module_& m) {
  nb::class_<HostClockOffset>(
      m, "HostClockOffset",
      "This host's clock against the job's reference host (rank 0's): reference_time = "
      "local_time - offset_ns, true to within +-uncertainty_ns at local time measured_at_ns "
      "(accgraph::timing::HostClockOffset).")
      .def(
          "__init__",
          [](HostClockOffset* self, int64_t offset_ns, uint64_t uncertainty_ns,
             uint64_t measured_at_ns) {
            new (self) HostClockOffset{offset_ns, uncertainty_ns, measured_at_ns};
          },
          nb::arg("offset_ns"), nb::arg("uncertainty_ns") = 0, nb::arg("measured_at_ns") = 0)
      .def_ro("offset_ns", &HostClockOffset::offset_ns,
              "This host's clock minus the reference host's, in nanoseconds.")
      .def_ro("uncertainty_ns", &HostClockOffset::uncertainty_ns,
              "How far offset_ns may be from the truth, in nanoseconds.")
      .def_ro("measured_at_ns", &HostClockOffset::measured_at_ns,
              "This host's clock (host_clock_ns()) when it was measured.")
      .def("to_dict", &host_offset_dict, "The attributes as a dict.")
      .def("__repr__", [](const HostClockOffset& h) {
        return "<accgraph.HostClockOffset " + std::to_string(h.offset_ns) + " ns +- " +
               std::to_string(h.uncertainty_ns) + " ns at " + std::to_string(h.measured_at_ns) +
               ">";
      });

  m.def("host_clock_ns", &timing::host_clock_ns,
        "This host's reference clock (CLOCK_REALTIME, ns) as accgraph reads it for clock "
        "offsets; skewed only by the test hook ACCGRAPH_TEST_HOST_CLOCK_SKEW.");

  m.def(
      "_measure_host_clock_offset",
      [](IntArg rank_arg, IntArg world_size_arg, nb::object send, nb::object receive,
         IntArg rounds_arg) {
        const int rank = int_arg<int>(rank_arg, "measure_host_clock_offset: rank");
        const int world_size =
            int_arg<int>(world_size_arg, "measure_host_clock_offset: world_size");
        const auto rounds =
            int_arg<size_t>(rounds_arg, "measure_host_clock_offset: rounds", 1, 100000);
        timing::HostClockTransport transport;
        // None (or anything not callable) is a transport without that callback: the core's
        // InvalidArgument says so (Note [Host clock offsets]).
        if (PyCallable_Check(send.ptr()) != 0)
          transport.send = [send](int peer, uint64_t value) { send(peer, value); };
        if (PyCallable_Check(receive.ptr()) != 0)
          transport.receive = [receive](int peer) { return received_value(receive(peer), peer); };
        if (!transport.send || !transport.receive)
          throw Error(ErrorCode::InvalidArgument,
                      std::string("measure_host_clock_offset: the transport lacks send or "
                                  "receive: give both callbacks (send is ") +
                          Py_TYPE(send.ptr())->tp_name + ", receive is " +
                          Py_TYPE(receive.ptr())->tp_name + ")");
        return timing::measure_host_clock_offset(rank, world_size, transport, rounds);
      },
      nb::arg("rank"), nb::arg("world_size"), nb::arg("send").none(), nb::arg("receive").none(),
      nb::arg("rounds") = 64,
      "The native half of accgraph.measure_host_clock_offset (accgraph/_host_clock.py), "
      "without its timeout.");
}

// calibrate_clock and write_trace: what one rank writes.
void bind_trace_writing(nb::module_& m) {
  m.def(
      "calibrate_clock",
      [](std::variant<PyStream*, std::string> where, IntArg device_arg, IntArg samples_arg) {
        const int device = int_arg<int>(device_arg, "calibrate_clock: device");
        const auto samples = int_arg<size_t>(samples_arg, "calibrate_clock: samples");
        if (auto* stream = std::get_if<PyStream*>(&where)) {
          std::shared_ptr<Stream> s = (*stream)->share();
          GilRelease release;
          return timing::calibrate_clock(*s, samples);
        }
        const std::string backend = std::get<std::string>(where);
        GilRelease release;
        return timing::calibrate_clock(backend, device, samples);
      },
      nb::arg("stream"), nb::arg("device") = 0, nb::arg("samples") = 100,
      nb::sig("def calibrate_clock(stream: Stream | str, device: int = 0, samples: int = 100) "
              "-> ClockOffset"),
      "Measures the offset of a device's marker clock against the host's CLOCK_REALTIME: "
      "`samples` times the device reads its clock between two host reads (on CUDA a one-thread "
      "kernel on a private stream answers a flag in host memory), and the shortest round trip "
      "wins. Give a Stream (its backend and device; the stream itself is not used) or a "
      "backend name and `device`. Call it when profiling starts, outside any capture, and "
      "pass the result to write_trace(clocks=[...]). UnsupportedError for a backend that "
      "cannot read its clock against the host's (host and cuda can).");

  m.def(
      "write_trace",
      [](nb::handle path, const std::vector<timing::ReplayReport>& reports, IntArg rank,
         IntArg world_size, std::string host, IntArg host_clock_uncertainty_ns,
         std::vector<DeviceClockOffset> clocks, std::vector<HostClockOffset> host_clock_offsets) {
        write_trace_file(path, reports, rank, world_size, host, host_clock_uncertainty_ns, clocks,
                         host_clock_offsets);
      },
      nb::arg("path"), nb::arg("reports"), nb::kw_only(), nb::arg("rank") = -1,
      nb::arg("world_size") = 0, nb::arg("host") = "", nb::arg("host_clock_uncertainty_ns") = 0,
      nb::arg("clocks") = std::vector<DeviceClockOffset>{},
      nb::arg("host_clock_offsets") = std::vector<HostClockOffset>{},
      nb::sig("def write_trace(path: str | os.PathLike[str], reports: "
              "collections.abc.Sequence[ReplayReport], *, rank: int = -1, world_size: int = 0, "
              "host: str = '', host_clock_uncertainty_ns: int = 0, clocks: "
              "collections.abc.Sequence[ClockOffset] = [], host_clock_offsets: "
              "collections.abc.Sequence[HostClockOffset] = []) -> None"),
      "Writes `reports` as a trace whose format the name chooses (accgraph::timing::"
      "write_trace_file): *.pftrace or *.perfetto-trace a native Perfetto trace (one track per "
      "stream and per lane, overlapping regions on backing tracks merged into one row, metadata "
      "as typed annotations), *.speedscope.json a speedscope profile, anything else Chrome "
      "trace JSON. For a "
      "job of several ranks give each rank's `rank` and `world_size`, this `host`, the host "
      "clock's synchronisation error bound and each device's ClockOffset, and for ranks on "
      "several hosts the HostClockOffset(s) measured at start and at flush "
      "(measure_host_clock_offset, accgraph.torch.measure_host_clock_offset), "
      "then merge the ranks' files with merge_traces(). Those options are refused for the other "
      "formats, which cannot hold them; UnsupportedError for a Perfetto trace in a package "
      "built without Perfetto support.");
}

// _write_perfetto_events: what annotate_trace writes for a .pftrace output. _check_output_file
// and _write_text_file: what python -m accgraph.torch checks before the script runs and writes
// after it (its HTML report), through the same atomic writer as the exporters.
void bind_event_writing(nb::module_& m) {
  m.def(
      "_trace_format",
      [](nb::handle path) { return timing::to_string(timing::trace_format_for(fs_path(path))); },
      nb::arg("path"), nb::sig("def _trace_format(path: str | os.PathLike[str]) -> str"),
      "The trace format the file name asks for (accgraph::timing::trace_format_for): 'chrome', "
      "'perfetto' or 'speedscope'. Internal: annotate_trace chooses its output by it, as "
      "write_trace does.");
  m.def(
      "_check_output_file",
      [](const std::string& path) { with_file_errors([&] { timing::check_output_file(path); }); },
      nb::arg("path"),
      "Checks, leaving the target as it is, that a file could be written at `path` "
      "(accgraph::timing::check_output_file); OSError with the system's reason otherwise. "
      "Internal: python -m accgraph.torch checks its output files before running the script.");
  m.def(
      "_write_text_file",
      [](const std::string& path, const std::string& what, const std::string& text) {
        write_output(path, what.c_str(), [&](std::ostream& out) { out << text; });
      },
      nb::arg("path"), nb::arg("what"), nb::arg("text"),
      "Writes `text` (UTF-8) to `path` through accgraph::timing::write_output_file (replaced "
      "only once complete); OSError with the system's reason. Internal: the HTML report.");
  m.def(
      "_write_bytes_file",
      [](const std::string& path, const std::string& what, nb::bytes data) {
        const std::string_view bytes(data.c_str(), data.size());
        write_output(path, what.c_str(), [&](std::ostream& out) {
          out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        });
      },
      nb::arg("path"), nb::arg("what"), nb::arg("data"),
      "Writes `data` to `path` as _write_text_file does. Internal: annotate_trace's .json and "
      ".json.gz outputs (gzip is compressed in Python, written here).");
  m.def("_write_perfetto_events", &write_events_file, nb::arg("path"), nb::arg("events"),
        nb::sig("def _write_perfetto_events(path: str | os.PathLike[str], events: "
                "collections.abc.Sequence[tuple[str, str, str, str, str, int, int, "
                "collections.abc.Sequence[tuple[str, str, bool]]]]) -> None"),
        "Writes Chrome trace events as a native Perfetto trace (accgraph::timing::"
        "write_perfetto_events), each event (phase, name, category, pid, tid, ts_ns, dur_ns, "
        "args) with pid and tid as text and args as (name, value, is_text): value is the JSON "
        "text of a non-string value. Internal: accgraph.torch.annotate_trace calls it for a "
        ".pftrace output. UnsupportedError in a package built without Perfetto support.");
}

// MergedRank and MergeSummary: what merge_traces() returns.
void bind_merge_results(nb::module_& m) {
  nb::class_<MergedRank>(m, "MergedRank", "One input of merge_traces(), as it was merged.")
      .def_ro("path", &MergedRank::path, "The input file.")
      .def_ro("rank", &MergedRank::rank, "Its rank.")
      .def_ro("host", &MergedRank::host, "The host it was written on ('' if not given).")
      .def_ro("host_clock_uncertainty_ns", &MergedRank::host_clock_uncertainty_ns,
              "Its host clock's synchronisation error bound.")
      .def_ro("host_clock_offsets", &MergedRank::host_clock_offsets,
              "The host clock offsets measured against rank 0's host, as applied (drift "
              "interpolated between the two); [] where none was measured.")
      .def_ro("host_clock_drift_ns", &MergedRank::host_clock_drift_ns,
              "With one measured host offset on another host than rank 0's: what its clock may "
              "have drifted from it to the rank's last event (100 ppm), part of the alignment "
              "uncertainty; 0 otherwise.")
      .def_ro("clocks", &MergedRank::clocks,
              "Per device: the offset applied (0 +- 0 for an uncalibrated device).")
      .def_ro("uncalibrated", &MergedRank::uncalibrated,
              "'<backend> device <n>' of each device that had no clock offset.")
      .def_ro("packets", &MergedRank::packets, "Packets taken from it.")
      .def("to_dict", &rank_dict, "The attributes as a dict.")
      .def("__repr__", [](const MergedRank& r) {
        return "<accgraph.MergedRank " + std::to_string(r.rank) + " '" + r.path + "' " +
               std::to_string(r.packets) + " packets>";
      });

  nb::class_<MergeSummary>(m, "MergeSummary", "What merge_traces() merged.")
      .def_ro("world_size", &MergeSummary::world_size, "The job's number of ranks.")
      .def_ro("ranks", &MergeSummary::ranks, "The inputs, by rank.")
      .def_ro("alignment_uncertainty_ns", &MergeSummary::alignment_uncertainty_ns,
              "The largest alignment error of two events of the merged timeline.")
      .def_ro("warnings", &MergeSummary::warnings, "E.g. ranks missing from the inputs.")
      .def("to_dict", &summary_dict, "The attributes as a dict.")
      .def("__repr__", [](const MergeSummary& s) {
        return "<accgraph.MergeSummary " + std::to_string(s.ranks.size()) + " of " +
               std::to_string(s.world_size) + " ranks, +- " +
               std::to_string(s.alignment_uncertainty_ns) + " ns>";
      });
}

// merge_traces and what it reports.
void bind_trace_merging(nb::module_& m) {
  bind_merge_results(m);

  m.def(
      "merge_traces",
      [](const std::vector<nb::object>& inputs, nb::handle output) {
        require_perfetto("merge_traces");
        std::vector<std::string> paths;
        for (const nb::object& input : inputs) paths.push_back(fs_path(input));
        const std::string output_path = fs_path(output);
        MergeSummary summary;
#if ACCGRAPH_PYTHON_WITH_PERFETTO
        // Refuses an output that is an input by any name; writes it only on success.
        with_file_errors([&] { summary = timing::merge_perfetto_trace_files(output_path, paths); });
#endif
        return summary;
      },
      nb::arg("inputs"), nb::arg("output"),
      nb::sig("def merge_traces(inputs: collections.abc.Sequence[str | os.PathLike[str]], "
              "output: str | os.PathLike[str]) -> MergeSummary"),
      "Merges the Perfetto traces that the ranks of one job wrote (write_trace with rank and "
      "world_size) into `output`, one timeline on the host clock: one process per rank and "
      "device, every event moved by its device's recorded clock offset (as `accgraph "
      "merge-traces`). InvalidArgumentError naming the file for an input that cannot be read "
      "or was not written with a rank, two inputs of one rank, or inputs that disagree on "
      "world_size or host clock; the output is written only when the merge succeeded.");
}

}  // namespace

void bind_traces(nb::module_& m) {
  bind_clock_offsets(m);
  bind_host_clock_offsets(m);
  bind_trace_writing(m);
  bind_event_writing(m);
  bind_trace_merging(m);
}

}  // namespace accgraph::python
