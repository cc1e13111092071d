// accgraph-bench-callgrind: the timing layer's work per region per replay on the host backend,
// counted in instructions under callgrind (repeatable on a noisy machine, unlike wall time).
// run_callgrind.sh runs this program four times (timed/untimed x two replay counts) and prints
// (instructions of a timed replay - those of the same untimed replay) / regions. The optional
// last argument turns ProfilerOptions::stats_thread on (the default) or off.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "accgraph/accgraph.hpp"

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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accgraph-bench-callgrind: %s\n", e.what());
    return 1;
  }
  return 0;
}
