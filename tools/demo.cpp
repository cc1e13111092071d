// `accgraph demo`: a small layered workload of portable operations, captured once with a timed
// region per layer and per operation, replayed R times, reported per region.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "cli.hpp"

namespace accgraph::cli {

namespace {

const char* const kDemoUsage =
    "usage: accgraph demo [--backend NAME] [--layers N] [--replays R] [--trace FILE]\n"
    "                     [--csv FILE] [--strategy NAME] [--ring K] [--delay-us US]\n"
    "\n"
    "Captures, per layer, a fill and a copy of a different size (and, where the backend can,\n"
    "a device delay of --delay-us microseconds), each in its own timed region inside a region\n"
    "for the layer; replays the graph R times; prints per-region statistics.\n"
    "\n"
    "  --backend NAME   backend to run on (default: the default backend, see `accgraph backends`)\n"
    "  --layers N       number of layers (default 4)\n"
    "  --replays R      number of replays (default 50)\n"
    "  --trace FILE     write a Chrome trace (JSON; open in Perfetto or chrome://tracing)\n"
    "  --csv FILE       write the per-region statistics as CSV\n"
    "  --strategy NAME  timestamp marker strategy (default: the backend's default)\n"
    "  --ring K         replays in flight per graph (default: the backend's default)\n"
    "  --delay-us US    duration of each layer's device delay (default 50; 0 disables)\n";

struct DemoOptions {
  std::string backend;
  long layers = 4;
  long replays = 50;
  std::string trace_path;
  std::string csv_path;
  std::string strategy;
  long ring = 0;
  long delay_us = 50;
};

DemoOptions parse(const std::vector<std::string>& args, bool& help) {
  DemoOptions options;
  help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size())
        throw UsageError(fmt::format("{} needs a value", arg), kDemoUsage);
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") {
      help = true;
    } else if (arg == "--backend") {
      options.backend = value();
    } else if (arg == "--layers") {
      options.layers = parse_count(arg, value(), 1, kDemoUsage);
    } else if (arg == "--replays") {
      options.replays = parse_count(arg, value(), 1, kDemoUsage);
    } else if (arg == "--trace") {
      options.trace_path = value();
    } else if (arg == "--csv") {
      options.csv_path = value();
    } else if (arg == "--strategy") {
      options.strategy = value();
    } else if (arg == "--ring") {
      options.ring = parse_count(arg, value(), 1, kDemoUsage);
    } else if (arg == "--delay-us") {
      options.delay_us = parse_count(arg, value(), 0, kDemoUsage);
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", arg), kDemoUsage);
    }
  }
  return options;
}

std::ofstream open_output(const std::string& path) {
  std::ofstream out(path);
  if (!out)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("cannot open '{}' for writing: check that the directory exists and "
                            "is writable",
                            path));
  return out;
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
  bool help = false;
  DemoOptions options = parse(args, help);
  if (help) {
    std::fputs(kDemoUsage, stdout);
    return 0;
  }

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

  timing::ProfilerOptions profiler_options;
  profiler_options.marker_strategy = options.strategy;
  profiler_options.ring_depth = static_cast<size_t>(options.ring);
  timing::Profiler profiler(profiler_options);

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

  if (!options.trace_path.empty()) {
    std::ofstream out = open_output(options.trace_path);
    timing::write_chrome_trace(out, profiler.reports());
    fmt::print("\ntrace written to {}\n", options.trace_path);
  }
  if (!options.csv_path.empty()) {
    std::ofstream out = open_output(options.csv_path);
    timing::write_stats_csv(out, stats);
    fmt::print("statistics written to {}\n", options.csv_path);
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
