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
#include "cli.hpp"

namespace accgraph::cli {

namespace {

// The bounds (cli.hpp) keep a run's memory and time in reason. The buffers take
// 64 KiB * N * (N + 1) bytes for N layers (two per layer, growing by 64 KiB a layer): 260 MiB at
// 64 layers, where one replay takes about 0.1 s on one CPU core. 100,000 replays of the default
// 4 layers run in about 10 s; the statistics keep 8 bytes per region per replay (up to 4 regions
// per layer). A trace keeps every report and builds the whole JSON document, about 2 KiB per
// region, so --trace allows at most 50,000 layer replays (200,000 regions, about 500 MB).
// A delay of 1 s per layer is longer than any demo needs, and far below Stream::delay's 24 hours.
const char* const kDemoUsage =
    "usage: accgraph demo [--backend NAME] [--layers N] [--replays R] [--trace FILE]\n"
    "                     [--csv FILE] [--strategy NAME] [--ring K] [--delay-us US]\n"
    "\n"
    "Captures, per layer, a fill and a copy of a different size (and, where the backend can,\n"
    "a device delay of --delay-us microseconds), each in its own timed region inside a region\n"
    "for the layer; replays the graph R times; prints per-region statistics.\n"
    "\n"
    "  --backend NAME   backend to run on (default: the default backend, see `accgraph backends`)\n"
    "  --layers N       number of layers, 1 to 64 (default 4); layer i copies 64 KiB * (i + 1),\n"
    "                   so N layers take 64 KiB * N * (N + 1) of memory (260 MiB at 64)\n"
    "  --replays R      number of replays, 1 to 100000 (default 50)\n"
    "  --trace FILE     write a Chrome trace (JSON; open in Perfetto or chrome://tracing); keeps\n"
    "                   every replay's report in memory, so N * R must be at most 50000\n"
    "  --csv FILE       write the per-region statistics as CSV\n"
    "  --strategy NAME  timestamp marker strategy (default: the backend's default)\n"
    "  --ring K         replays in flight per graph, 1 to 65536 (default: the backend's\n"
    "                   default; backends may allow fewer)\n"
    "  --delay-us US    duration of each layer's device delay, 0 to 1000000 (default 50;\n"
    "                   0 disables)\n"
    "\n"
    "The --trace and --csv files are created (or truncated) before the run, so a path that\n"
    "cannot be written fails at once.\n";

// A file the demo writes at the end, opened (created or truncated) before the run, so that a
// path that cannot be written fails at once with the system's reason (audit 4.8), and checked
// through the close, so that a write error is never lost (4.9).
class OutputFile {
 public:
  OutputFile(std::string path, const char* option, const char* what)
      : path_(std::move(path)),
        option_(option),
        what_(what),
        file_(std::fopen(path_.c_str(), "wb")) {
    if (file_ == nullptr)
      throw OutputError(fmt::format("cannot open '{}' ({}) for writing: {}: check the path, that "
                                    "its directory exists and that you may write there",
                                    path_, option_, std::strerror(errno)));
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);  // an error path: the run failed before writing
  }

  /// Writes `bytes`, flushes and closes the file; an OutputError on any failure.
  void write_and_close(const std::string& bytes) {
    std::FILE* file = std::exchange(file_, nullptr);
    errno = 0;
    const bool written =
        std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size() && std::fflush(file) == 0;
    const int write_errno = errno;
    const bool closed = std::fclose(file) == 0;
    if (!written || !closed)
      throw OutputError(fmt::format("cannot write {} to '{}' ({}): {}: the file is incomplete; "
                                    "free space or choose another file",
                                    what_, path_, option_,
                                    std::strerror(!written ? write_errno : errno)));
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const char* option_;
  const char* what_;
  std::FILE* file_;
};

}  // namespace

DemoOptions parse_demo_options(const std::vector<std::string>& args) {
  DemoOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size())
        throw UsageError(fmt::format("{} needs a value", arg), kDemoUsage);
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
    } else if (arg == "--delay-us") {
      options.delay_us = parse_count(arg, value(), 0, kMaxDemoDelayUs, kDemoUsage);
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", arg), kDemoUsage);
    }
  }
  if (!options.trace_path.empty() && options.layers * options.replays > kMaxDemoTracedLayers)
    throw UsageError(fmt::format("--trace keeps every region of every replay: --layers times "
                                 "--replays must be at most {} with --trace, got {} * {} = {}",
                                 kMaxDemoTracedLayers, options.layers, options.replays,
                                 options.layers * options.replays),
                     kDemoUsage);
  return options;
}

timing::ProfilerOptions demo_profiler_options(const DemoOptions& options) {
  timing::ProfilerOptions profiler_options;
  profiler_options.marker_strategy = options.strategy;
  profiler_options.ring_depth = static_cast<size_t>(options.ring);
  // Only the trace needs the reports; the table and the CSV need the statistics alone.
  profiler_options.keep_reports = !options.trace_path.empty();
  return profiler_options;
}

int run_demo(const DemoOptions& options) {
  if (options.help) {
    std::fputs(kDemoUsage, stdout);
    return 0;
  }
  std::optional<OutputFile> trace_file, csv_file;
  if (!options.trace_path.empty())
    trace_file.emplace(options.trace_path, "--trace", "the Chrome trace");
  if (!options.csv_path.empty()) csv_file.emplace(options.csv_path, "--csv", "the statistics CSV");

  Stream stream = Stream::create(options.backend);
  const std::string backend_name = stream.backend_name();
  const Capabilities caps = stream.capabilities();
  const bool with_delay = caps.timed_delay && options.delay_us > 0;

  // Per layer: a source filled with the layer's byte, and a destination the copy writes.
  std::vector<Buffer> sources, destinations;
  std::vector<size_t> sizes;
  for (long layer = 0; layer < options.layers; ++layer) {
    size_t bytes = size_t(64) * 1024 * size_t(1 + layer);  // 64 KiB, 128 KiB, ...
    sizes.push_back(bytes);
    sources.push_back(Buffer::allocate(stream, bytes, MemoryKind::Device));
    destinations.push_back(Buffer::allocate(stream, bytes, MemoryKind::Device));
  }

  timing::Profiler profiler(demo_profiler_options(options));

  AcceleratorGraph graph(backend_name);
  profiler.attach(graph);
  graph.capture_begin(stream);
  for (long layer = 0; layer < options.layers; ++layer) {
    const size_t bytes = sizes[layer];
    timing::Metadata layer_meta = {{"layer", std::to_string(layer)},
                                   {"bytes", std::to_string(bytes)}};
    auto layer_region = profiler.region(stream, fmt::format("layer{}", layer), layer_meta);
    {
      auto r = profiler.region(stream, "fill", {{"bytes", std::to_string(bytes)}});
      stream.fill(sources[layer], static_cast<uint8_t>(layer + 1));
    }
    {
      auto r = profiler.region(stream, "copy", {{"bytes", std::to_string(bytes)}});
      stream.copy(destinations[layer], sources[layer]);
    }
    if (with_delay) {
      auto r = profiler.region(stream, "compute",
                               {{"delay_us", std::to_string(options.delay_us)}});
      stream.delay(std::chrono::microseconds(options.delay_us));
    }
  }
  graph.capture_end();

  auto started = std::chrono::steady_clock::now();
  for (long i = 0; i < options.replays; ++i) graph.replay();
  profiler.flush();
  stream.synchronize();
  double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count();

  // The replays really ran: every destination holds its layer's byte.
  size_t wrong_layers = 0;
  for (long layer = 0; layer < options.layers; ++layer) {
    Buffer check = Buffer::allocate(stream, sizes[layer], MemoryKind::Host);
    stream.copy(check, destinations[layer]);
    stream.synchronize();
    const uint8_t* bytes = check.as<uint8_t>();
    for (size_t i = 0; i < sizes[layer]; ++i)
      if (bytes[i] != static_cast<uint8_t>(layer + 1)) {
        ++wrong_layers;
        break;
      }
  }

  std::vector<timing::RegionStats> stats = profiler.stats();
  std::string device_name = stream.backend().devices().at(stream.device()).name;
  fmt::print("accgraph demo: backend {} ({}), {} layers, {} replays in {:.2f} ms, marker "
             "strategy {}, {} reports\n\n",
             backend_name, device_name, options.layers, options.replays, wall_ms,
             options.strategy.empty() ? (caps.marker_strategies.empty()
                                             ? std::string("-")
                                             : caps.marker_strategies.front())
                                      : options.strategy,
             profiler.delivered());
  timing::write_stats_table(std::cout, stats);
  if (!with_delay)
    fmt::print("\n(no compute regions: {})\n",
               options.delay_us == 0 ? "--delay-us 0"
                                     : "this backend has no timed delay (capabilities)");

  if (trace_file) {
    std::ostringstream text;
    timing::write_chrome_trace(text, profiler.reports());
    trace_file->write_and_close(text.str());
    fmt::print("\ntrace written to {}\n", trace_file->path());
  }
  if (csv_file) {
    std::ostringstream text;
    timing::write_stats_csv(text, stats);
    csv_file->write_and_close(text.str());
    fmt::print("statistics written to {}\n", csv_file->path());
  }
  if (wrong_layers != 0) {
    fmt::print(stderr, "accgraph demo: {} layer(s) hold wrong data after the replays\n",
               wrong_layers);
    return 1;
  }
  fmt::print("data check: every layer's destination holds the expected bytes\n");
  return 0;
}

}  // namespace accgraph::cli
