// accgraph-bench-host: (a) replay overhead per node, (b) timed vs untimed replay, on the host
// backend. Every figure is a ratio against a baseline measured side by side in the same run, in
// interleaved rounds (medians), so machine noise hits both alike. Numbers, not pass/fail.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "accgraph/accgraph.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using accgraph::AcceleratorGraph;
using accgraph::Buffer;
using accgraph::Stream;
namespace timing = accgraph::timing;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

nlohmann::json results = nlohmann::json::object();

// (a) One replay (enqueue + wait) of a graph of `nodes` 64-byte fills, against enqueueing the same
// fills eagerly and waiting: what the graph costs or saves per node on this backend.
void bench_replay_overhead() {
  fmt::print("(a) replay overhead per node: replay+synchronize vs the same ops eagerly "
             "(median us per run)\n");
  fmt::print("{:>7} {:>12} {:>12} {:>10} {:>14} {:>14}\n", "nodes", "replay us", "eager us",
             "ratio", "replay us/node", "eager us/node");
  Stream s = Stream::create("host");
  Buffer target = Buffer::allocate(s, 64);
  for (int nodes : {1, 10, 100, 1000}) {
    AcceleratorGraph graph("host");
    graph.capture_begin(s);
    for (int i = 0; i < nodes; ++i) s.fill(target, static_cast<uint8_t>(i));
    graph.capture_end();
    const int per_round = nodes >= 1000 ? 20 : 200, rounds = 25, warmup = 3;
    std::vector<double> replay_us, eager_us;
    auto time_replays = [&] {
      auto t0 = Clock::now();
      for (int r = 0; r < per_round; ++r) {
        graph.replay();
        s.synchronize();
      }
      return us_since(t0) / per_round;
    };
    auto time_eager = [&] {
      auto t0 = Clock::now();
      for (int r = 0; r < per_round; ++r) {
        for (int i = 0; i < nodes; ++i) s.fill(target, static_cast<uint8_t>(i));
        s.synchronize();
      }
      return us_since(t0) / per_round;
    };
    for (int round = 0; round < rounds; ++round) {
      // Alternate which goes first, so a frequency ramp or a neighbour's burst hits both alike.
      double replay = 0, eager = 0;
      if (round % 2 == 0) {
        replay = time_replays();
        eager = time_eager();
      } else {
        eager = time_eager();
        replay = time_replays();
      }
      if (round < warmup) continue;
      replay_us.push_back(replay);
      eager_us.push_back(eager);
    }
    double r = median(replay_us), e = median(eager_us);
    fmt::print("{:>7} {:>12.2f} {:>12.2f} {:>9.2f}x {:>14.3f} {:>14.3f}\n", nodes, r, e, r / e,
               r / nodes, e / nodes);
    results["a_replay_overhead"].push_back({{"nodes", nodes},
                                            {"replay_us", r},
                                            {"eager_us", e},
                                            {"ratio_replay_vs_eager", r / e}});
  }
}

// (b) R replays back to back then one wait, of a graph with `regions` regions around tiny fills:
// untimed vs timed with lazy delivery (the ring) vs Immediate delivery (waits every replay).
void bench_timed_replay() {
  fmt::print("\n(b) timed vs untimed replay: {} replays back to back (median us per replay)\n",
             200);
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "regions", "untimed", "timed lazy",
             "immediate", "lazy x", "immed. x");
  Stream s = Stream::create("host");
  Buffer target = Buffer::allocate(s, 64);
  for (int regions : {10, 100}) {
    struct Variant {
      std::unique_ptr<timing::Profiler> profiler;
      std::unique_ptr<AcceleratorGraph> graph;
    };
    auto make = [&](bool timed, timing::Delivery delivery) {
      Variant v;
      v.graph = std::make_unique<AcceleratorGraph>("host");
      if (timed) {
        timing::ProfilerOptions options;
        options.delivery = delivery;
        options.keep_reports = false;
        v.profiler = std::make_unique<timing::Profiler>(options);
        v.profiler->attach(*v.graph);
      }
      v.graph->capture_begin(s);
      for (int r = 0; r < regions; ++r) {
        if (v.profiler) v.profiler->begin(s, fmt::format("r{}", r));
        s.fill(target, static_cast<uint8_t>(r));
        if (v.profiler) v.profiler->end(s);
      }
      v.graph->capture_end();
      return v;
    };
    std::vector<Variant> variants;
    variants.push_back(make(false, timing::Delivery::Lazy));
    variants.push_back(make(true, timing::Delivery::Lazy));
    variants.push_back(make(true, timing::Delivery::Immediate));
    const int replays = 200, rounds = 25, warmup = 3;
    std::vector<std::vector<double>> us(variants.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < variants.size(); ++k) {
        size_t i = (k + static_cast<size_t>(round)) % variants.size();  // rotate the order
        Variant& v = variants[i];
        auto t0 = Clock::now();
        for (int r = 0; r < replays; ++r) v.graph->replay();
        if (v.profiler) v.profiler->flush();  // every report delivered, inside the timing
        s.synchronize();
        double per_replay = us_since(t0) / replays;
        if (round >= warmup) us[i].push_back(per_replay);
      }
    }
    double u = median(us[0]), lazy = median(us[1]), immediate = median(us[2]);
    fmt::print("{:>8} {:>12.2f} {:>12.2f} {:>12.2f} {:>9.2f}x {:>9.2f}x\n", regions, u, lazy,
               immediate, lazy / u, immediate / u);
    results["b_timed_replay"].push_back({{"regions", regions},
                                         {"untimed_us", u},
                                         {"timed_lazy_us", lazy},
                                         {"timed_immediate_us", immediate},
                                         {"lazy_ratio", lazy / u},
                                         {"immediate_ratio", immediate / u},
                                         {"reports_per_variant",
                                          variants[1].profiler->delivered()}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::puts("usage: accgraph-bench-host [--json FILE]");
      return 0;
    } else {
      std::fprintf(stderr, "accgraph-bench-host: unknown argument '%s'\nusage: "
                           "accgraph-bench-host [--json FILE]\n", arg.c_str());
      return 2;
    }
  }
  try {
    fmt::print("accgraph-bench-host: host backend, {}\n\n",
               accgraph::backend("host").devices().at(0).name);
    bench_replay_overhead();
    bench_timed_replay();
  } catch (const accgraph::Error& e) {
    std::fprintf(stderr, "accgraph-bench-host: %s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << results.dump(2) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "accgraph-bench-host: cannot write '%s'\n", json_path.c_str());
      return 1;
    }
    fmt::print("\nJSON written to {}\n", json_path);
  }
  return 0;
}
