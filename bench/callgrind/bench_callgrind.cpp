// accgraph-bench-callgrind: the timing layer's work per region per replay on the host backend,
// counted in instructions under callgrind (repeatable on a noisy machine, unlike wall time).
// run_callgrind.sh runs this program four times (timed/untimed x two replay counts) and prints
// (instructions of a timed replay - those of the same untimed replay) / regions. The optional
// last argument turns ProfilerOptions::stats_thread on (the default) or off.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stats_internal.hpp"  // detail::stats_thread_counters
#include "accgraph/accgraph.hpp"

namespace {

// Waits (up to 10 minutes: callgrind is slow) until the statistics thread (or add(), its queue
// full) folded every batch that flush() handed over, so that the statistics thread's count
// covers every replay's fold: the first replay alone, then stages of up to 16 replays within
// 256 KiB of marker times (Note [Stats fold] in timing/model/stats.cpp; no parents here).
void wait_for_batches(int regions, long replays) {
  const long per_stage = std::clamp<long>((256 << 10) / 8 / (regions + 1), 1, 16);
  const uint64_t want = 1 + static_cast<uint64_t>((replays - 1) / per_stage);
  for (int i = 0; i < 600000; ++i) {
    const accgraph::detail::StatsThreadCounters now = accgraph::detail::stats_thread_counters();
    if (now.thread_batches + now.add_batches >= want) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::fprintf(stderr,
               "accgraph-bench-callgrind: the statistics thread did not fold %llu "
               "batches within 10 minutes\n",
               static_cast<unsigned long long>(want));
}

}  // namespace

int main(int argc, char** argv) {
  const bool stats_thread_arg_ok =
      argc == 4 || (argc == 5 && (std::string(argv[4]) == "stats-thread" ||
                                  std::string(argv[4]) == "no-stats-thread"));
  if (!stats_thread_arg_ok ||
      (std::string(argv[1]) != "timed" && std::string(argv[1]) != "untimed")) {
    std::fprintf(stderr,
                 "usage: accgraph-bench-callgrind timed|untimed REGIONS REPLAYS "
                 "[stats-thread|no-stats-thread]\n");
    return 2;
  }
  using namespace accgraph;
  const bool timed = std::string(argv[1]) == "timed";
  const int regions = std::atoi(argv[2]);
  const long replays = std::atol(argv[3]);
  try {
    Stream s = Stream::create("host");
    Buffer target = Buffer::allocate(s, 64);
    timing::ProfilerOptions options;
    options.keep_reports = 0;  // statistics on (the default), no report kept
    options.stats_thread = argc < 5 || std::string(argv[4]) == "stats-thread";
    std::unique_ptr<timing::Profiler> profiler;
    if (timed) profiler = std::make_unique<timing::Profiler>(options);
    AcceleratorGraph graph("host");
    if (profiler) profiler->attach(graph);
    graph.capture_begin(s);
    std::vector<std::string> names;
    for (int r = 0; r < regions; ++r) names.push_back("r" + std::to_string(r));
    for (int r = 0; r < regions; ++r) {
      if (profiler) {
        auto region = profiler->region(s, names[r]);
        s.fill(target, static_cast<uint8_t>(r));
      } else {
        s.fill(target, static_cast<uint8_t>(r));
      }
    }
    graph.capture_end();
    for (long i = 0; i < replays; ++i) graph.replay();
    s.synchronize();
    if (profiler) profiler->flush();
    if (profiler && options.stats_thread) wait_for_batches(regions, replays);
    profiler.reset();  // joins the statistics thread (dropping what it did not fold)
    // Who folded the statistics' batches (Note [Stats thread]): run_callgrind.sh prints it.
    const detail::StatsThreadCounters folded = detail::stats_thread_counters();
    std::fprintf(stderr,
                 "statistics batches: %llu on the statistics thread, %llu in add(), %llu inline\n",
                 static_cast<unsigned long long>(folded.thread_batches),
                 static_cast<unsigned long long>(folded.add_batches),
                 static_cast<unsigned long long>(folded.inline_batches));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accgraph-bench-callgrind: %s\n", e.what());
    return 1;
  }
  return 0;
}
