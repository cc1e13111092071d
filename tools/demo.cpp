// `accgraph demo`: a small layered workload of portable operations, captured once with a timed
// region per layer and per operation, replayed R times, reported per region.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"  // Stream::backend()'s devices()
#include "cli.hpp"
#include "output_file.hpp"

namespace accgraph::cli {

namespace {

// The bounds (cli.hpp) keep a run's memory and time in reason. The buffers take
// 64 KiB * N * (N + 1) bytes for N layers (two per layer, growing by 64 KiB a layer): 260 MiB at
// 64 layers, where one replay takes about 0.1 s on one CPU core. A replay lasts at least
// layers x --delay-us, so 100,000 replays of the default 4 layers x 50 us take at least 20 s
// (30 s measured on the host backend of an idle 2-core machine, 57 s loaded; --lanes 1.3 to
// 1.5 ms a replay); the
// statistics keep 8 bytes per region per replay (up to 4 regions per layer). A trace keeps every
// report and builds the whole JSON document, about 2 KiB per region, so --trace allows at most
// 50,000 layer replays (200,000 regions, about 500 MB). A delay of 1 s per layer is longer than any
// demo needs, and far below Stream::delay's 24 hours.
const char* const kDemoUsage =
    "usage: accgraph demo [--backend NAME] [--layers N] [--replays R] [--trace FILE]\n"
    "                     [--csv FILE] [--strategy NAME] [--ring K] [--delay-us US] [--lanes]\n"
    "                     [--raw]\n"
    "\n"
    "Captures, per layer, a fill and a copy of a different size (and, where the backend can,\n"
    "a device delay of --delay-us microseconds), each in its own timed region inside a region\n"
    "for the layer; replays the graph R times; prints per-region statistics.\n"
    "\n"
    "  --backend NAME   backend to run on (default: the default backend, see `accgraph backends`)\n"
    "  --layers N       number of layers, 1 to 64 (default 4); layer i copies 64 KiB * (i + 1),\n"
    "                   so N layers take 64 KiB * N * (N + 1) of memory (260 MiB at 64)\n"
    "  --replays R      number of replays, 1 to 100000 (default 50)\n"
    "  --trace FILE     write a trace of every region of every replay in the format FILE's\n"
    "                   name asks for: FILE.pftrace (or .perfetto-trace) a native Perfetto\n"
    "                   trace, FILE.speedscope.json a speedscope profile, any other name a\n"
    "                   Chrome trace (JSON); open the first and last in ui.perfetto.dev, the\n"
    "                   speedscope one in speedscope.app. Keeps every report in memory: N * R\n"
    "                   at most 50000\n"
    "  --csv FILE       write the per-region statistics as CSV\n"
    "  --strategy NAME  timestamp marker strategy (default: the backend's default)\n"
    "  --ring K         replays in flight per graph, 1 to 65536 (default: the backend's\n"
    "                   default; backends may allow fewer)\n"
    "  --delay-us US    duration of each layer's device delay, 0 to 1000000 (default 50;\n"
    "                   0 disables)\n"
    "  --lanes          a multi-stream workload instead: per layer an \"attention\" region\n"
    "                   (fill, copy) on the capture stream, then two forked streams with \"mlp\"\n"
    "                   and \"comm\" regions (device delays), joined again; each region names a\n"
    "                   lane, a trace track of its own, and the two comm regions overlap in time\n"
    "                   (try --trace lanes.pftrace and open it in ui.perfetto.dev)\n"
    "  --raw            durations as the markers read them: the device's marker overhead is\n"
    "                   not taken off (it is by default: see `Marker overhead` in the README)\n"
    "\n"
    "The --trace and --csv paths are checked before the run, so a path that cannot be\n"
    "written fails at once; an existing file is replaced only once its new content is\n"
    "complete (written to FILE.tmp.XXXXXX, then renamed), so a failed run leaves it as it was.\n";

// A trace keeps every report: its bound on layers times replays (kDemoUsage's comment).
void check_trace_bound(const DemoOptions& options) {
  if (!options.trace_path.empty() && options.layers * options.replays > kMaxDemoTracedLayers)
    throw UsageError(fmt::format("--trace keeps every region of every replay: --layers times "
                                 "--replays must be at most {} with --trace, got {} * {} = {}",
                                 kMaxDemoTracedLayers, options.layers, options.replays,
                                 options.layers * options.replays),
                     kDemoUsage);
}

}  // namespace

DemoOptions parse_demo_options(const std::vector<std::string>& args) {
  DemoOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", arg), kDemoUsage);
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--backend") {
      options.backend = value();
    } else if (arg == "--layers") {
      options.layers = parse_count(arg, value(), 1, kMaxDemoLayers, kDemoUsage);
    } else if (arg == "--replays") {
      options.replays = parse_count(arg, value(), 1, kMaxDemoReplays, kDemoUsage);
    } else if (arg == "--trace") {
      options.trace_path = value();
    } else if (arg == "--csv") {
      options.csv_path = value();
    } else if (arg == "--strategy") {
      options.strategy = value();
    } else if (arg == "--ring") {
      options.ring = parse_count(arg, value(), 1, kMaxDemoRing, kDemoUsage);
    } else if (arg == "--lanes") {
      options.lanes = true;
    } else if (arg == "--raw") {
      options.raw = true;
    } else if (arg == "--delay-us") {
      options.delay_us = parse_count(arg, value(), 0, kMaxDemoDelayUs, kDemoUsage);
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", arg), kDemoUsage);
    }
  }
  check_trace_bound(options);
  return options;
}

timing::ProfilerOptions demo_profiler_options(const DemoOptions& options) {
  timing::ProfilerOptions profiler_options;
  profiler_options.marker_strategy = options.strategy;
  profiler_options.ring_depth = static_cast<size_t>(options.ring);
  profiler_options.subtract_marker_overhead = !options.raw;
  // Only the trace needs the reports; the table and the CSV need the statistics alone.
  profiler_options.keep_reports =
      options.trace_path.empty() ? timing::KeepReports(0) : timing::KeepReports::all();
  return profiler_options;
}

namespace {

// One layer of `demo --lanes`: the capture forks onto `mlp_stream` and `comm_stream` and joins
// them again, and the regions name lanes, so the trace shows per process the stream tracks and
// three lane tracks: "attention" (on the capture stream), "mlp" and "comm". The comm lane gets
// one region from each forked stream, and they overlap in time: the exporters split the lane
// over overlap tracks (Chrome JSON) or backing tracks shown as one row (Perfetto).
void capture_lanes_layer(timing::Profiler& profiler, Stream& stream, Stream& mlp_stream,
                         Stream& comm_stream, long layer, Buffer& source, Buffer& destination,
                         long delay_us) {
  const std::string bytes = std::to_string(source.size());
  const std::string elements = std::to_string(source.size() / 4);
  auto layer_region = profiler.region(stream, fmt::format("layer{}", layer),
                                      {{"layer", std::to_string(layer)}, {"bytes", bytes}});
  {
    auto attention = profiler.region(stream, "attention", {{"bytes", bytes}}, "attention");
    {
      auto r = profiler.region(stream, "fill", {{"bytes", bytes}});
      stream.fill(source, static_cast<uint8_t>(layer + 1));
    }
    auto r = profiler.region(stream, "copy", {{"bytes", bytes}});
    stream.copy(destination, source);
  }
  const auto delay = [](Stream& s, long us) {
    if (us > 0) s.delay(std::chrono::microseconds(us));
  };
  mlp_stream.wait(stream);
  comm_stream.wait(stream);
  {
    auto r = profiler.region(mlp_stream, "mlp", {{"delay_us", std::to_string(delay_us)}}, "mlp");
    delay(mlp_stream, delay_us);
  }
  const timing::Metadata collective = {
      {"collective", "all_reduce"},  {"In msg nelems", elements}, {"Out msg nelems", elements},
      {"dtype", "float32"},          {"Group size", "1"},         {"Process Group Name", "demo"},
      {"Process Group Ranks", "[0]"}};
  timing::Metadata scatter = collective;
  scatter[0].second = "reduce_scatter";
  // The two comm regions overlap without nesting on every backend, whatever order it runs the
  // two streams in: the waits make reduce_scatter begin at least d/2 after all_reduce began,
  // all_reduce end at least d/2 after reduce_scatter began, and reduce_scatter end at least d/2
  // after all_reduce ended.
  auto all_reduce = profiler.region(comm_stream, "all_reduce", collective, "comm");
  delay(comm_stream, delay_us / 2);
  mlp_stream.wait(comm_stream);
  auto reduce_scatter = profiler.region(mlp_stream, "reduce_scatter", scatter, "comm");
  delay(mlp_stream, delay_us / 2);
  comm_stream.wait(mlp_stream);
  delay(comm_stream, delay_us / 2);
  all_reduce.end();
  mlp_stream.wait(comm_stream);
  delay(mlp_stream, delay_us / 2);
  reduce_scatter.end();
  stream.wait(mlp_stream);
  stream.wait(comm_stream);
}

// One layer of the default workload: fill and copy, and a device delay of `delay_us` when it is
// not 0, each in its own region inside the layer's.
void capture_layer(timing::Profiler& profiler, Stream& stream, long layer, size_t bytes,
                   Buffer& source, Buffer& destination, long delay_us) {
  timing::Metadata layer_meta = {{"layer", std::to_string(layer)},
                                 {"bytes", std::to_string(bytes)}};
  auto layer_region = profiler.region(stream, fmt::format("layer{}", layer), layer_meta);
  {
    auto r = profiler.region(stream, "fill", {{"bytes", std::to_string(bytes)}});
    stream.fill(source, static_cast<uint8_t>(layer + 1));
  }
  {
    auto r = profiler.region(stream, "copy", {{"bytes", std::to_string(bytes)}});
    stream.copy(destination, source);
  }
  if (delay_us > 0) {
    auto r = profiler.region(stream, "compute", {{"delay_us", std::to_string(delay_us)}});
    stream.delay(std::chrono::microseconds(delay_us));
  }
}

// What the demo runs on: its streams and, per layer, a source filled with the layer's byte and
// a destination the copy writes. Members in this order so that the forked streams and the
// buffers go before the stream they were made on.
struct DemoWorkload {
  Stream stream;
  std::string backend_name;
  Capabilities caps;
  bool with_delay = false;
  std::vector<Buffer> sources, destinations;
  std::vector<size_t> sizes;
  // --lanes: two more streams the capture forks onto (they must outlive the graph's replays).
  std::vector<Stream> forked;
};

DemoWorkload prepare_workload(const DemoOptions& options) {
  DemoWorkload w{Stream::create(options.backend)};
  w.backend_name = w.stream.backend_name();
  w.caps = w.stream.capabilities();
  w.with_delay = w.caps.timed_delay && options.delay_us > 0;
  for (long layer = 0; layer < options.layers; ++layer) {
    size_t bytes = size_t(64) * 1024 * size_t(1 + layer);  // 64 KiB, 128 KiB, ...
    w.sizes.push_back(bytes);
    w.sources.push_back(Buffer::allocate(w.stream, bytes, MemoryKind::Device));
    w.destinations.push_back(Buffer::allocate(w.stream, bytes, MemoryKind::Device));
  }
  if (options.lanes) {
    if (!w.caps.multi_stream_capture)
      throw Error(ErrorCode::Unsupported,
                  fmt::format("demo --lanes forks the capture onto more streams, which the {} "
                              "backend cannot capture (capabilities: multi-stream capture no): "
                              "run it on another backend (`accgraph backends`)",
                              w.backend_name));
    w.forked.push_back(Stream::create(w.backend_name, w.stream.device()));
    w.forked.push_back(Stream::create(w.backend_name, w.stream.device()));
  }
  return w;
}

void capture_workload(const DemoOptions& options, DemoWorkload& w, timing::Profiler& profiler,
                      AcceleratorGraph& graph) {
  const long delay_us = w.with_delay ? options.delay_us : 0;
  graph.capture_begin(w.stream);
  for (long layer = 0; layer < options.layers; ++layer) {
    if (options.lanes)
      capture_lanes_layer(profiler, w.stream, w.forked[0], w.forked[1], layer, w.sources[layer],
                          w.destinations[layer], delay_us);
    else
      capture_layer(profiler, w.stream, layer, w.sizes[layer], w.sources[layer],
                    w.destinations[layer], delay_us);
  }
  graph.capture_end();
}

// Replays the graph, waits for every report; returns the wall time in milliseconds.
double replay_workload(const DemoOptions& options, DemoWorkload& w, timing::Profiler& profiler,
                       AcceleratorGraph& graph) {
  auto started = std::chrono::steady_clock::now();
  for (long i = 0; i < options.replays; ++i) graph.replay();
  profiler.flush();
  w.stream.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
      .count();
}

// The replays really ran: the number of layers whose destination does not hold the layer's byte.
size_t count_wrong_layers(DemoWorkload& w) {
  size_t wrong_layers = 0;
  for (size_t layer = 0; layer < w.sizes.size(); ++layer) {
    Buffer check = Buffer::allocate(w.stream, w.sizes[layer], MemoryKind::Host);
    w.stream.copy(check, w.destinations[layer]);
    w.stream.synchronize();
    const uint8_t* bytes = check.as<uint8_t>();
    for (size_t i = 0; i < w.sizes[layer]; ++i)
      if (bytes[i] != static_cast<uint8_t>(layer + 1)) {
        ++wrong_layers;
        break;
      }
  }
  return wrong_layers;
}

void print_results(const DemoOptions& options, const DemoWorkload& w,
                   const timing::Profiler& profiler, const std::vector<timing::RegionStats>& stats,
                   double wall_ms) {
  std::string device_name = w.stream.backend().devices().at(w.stream.device()).name;
  fmt::print(
      "accgraph demo: backend {} ({}), {} layers, {} replays in {:.2f} ms, marker "
      "strategy {}, {} reports\n\n",
      w.backend_name, device_name, options.layers, options.replays, wall_ms,
      options.strategy.empty()
          ? (w.caps.marker_strategies.empty() ? std::string("-") : w.caps.marker_strategies.front())
          : options.strategy,
      profiler.delivered());
  timing::write_stats_table(std::cout, stats);
  if (!w.with_delay)
    fmt::print(
        options.lanes ? "\n(no device delays in the mlp and comm regions: {})\n"
                      : "\n(no compute regions: {})\n",
        options.delay_us == 0 ? "--delay-us 0" : "this backend has no timed delay (capabilities)");
}

// The --trace and --csv files, opened (checked) before the run.
struct DemoOutputs {
  std::optional<OutputFile> trace_file, csv_file;

  explicit DemoOutputs(const DemoOptions& options) {
    if (!options.trace_path.empty())  // a format this build cannot write fails here too
      trace_file.emplace(options.trace_path, "--trace", "the trace", &timing::check_trace_file);
    if (!options.csv_path.empty())
      csv_file.emplace(options.csv_path, "--csv", "the statistics CSV");
  }

  void write(const timing::Profiler& profiler,
             const std::vector<timing::RegionStats>& stats) {
    if (trace_file) {
      trace_file->write_trace(profiler.reports());
      fmt::print("\ntrace written to {}\n", trace_file->path());
    }
    if (csv_file) {
      csv_file->write([&](std::ostream& out) { timing::write_stats_csv(out, stats); });
      fmt::print("statistics written to {}\n", csv_file->path());
    }
  }
};

}  // namespace

int run_demo(const DemoOptions& options) {
  if (options.help) {
    std::fputs(kDemoUsage, stdout);
    return 0;
  }
  DemoOutputs outputs(options);
  DemoWorkload workload = prepare_workload(options);
  timing::Profiler profiler(demo_profiler_options(options));
  AcceleratorGraph graph(workload.backend_name);
  profiler.attach(graph);
  capture_workload(options, workload, profiler, graph);
  const double wall_ms = replay_workload(options, workload, profiler, graph);
  const size_t wrong_layers = count_wrong_layers(workload);

  std::vector<timing::RegionStats> stats = profiler.stats();
  print_results(options, workload, profiler, stats, wall_ms);
  outputs.write(profiler, stats);
  if (wrong_layers != 0) {
    fmt::print(stderr, "accgraph demo: {} layer(s) hold wrong data after the replays\n",
               wrong_layers);
    return 1;
  }
  fmt::print("data check: every layer's destination holds the expected bytes\n");
  return 0;
}

}  // namespace accgraph::cli
