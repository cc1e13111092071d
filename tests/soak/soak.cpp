// Soak test: thousands of timed capture/replay/reset cycles, and thousands of short-lived timed
// streams, on one backend; every report must be delivered and the resident set must stay flat.
//
//   accgraph-soak --backend host --case replay_cycles [--iterations 10000]
//   accgraph-soak --backend level_zero --case short_streams      (ZE_ENABLE_ALT_DRIVERS set)
//
// Exit code 0: passed; 1: a check failed (the message says which and by how much), or the
// backend is unavailable (ctest registers each run only where its backend can run); 2: bad
// arguments.
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"

namespace {

using accgraph::AcceleratorGraph;
using accgraph::Buffer;
using accgraph::Stream;
using accgraph::timing::Profiler;
using accgraph::timing::ProfilerOptions;

// Note [Soak RSS bound]
// The resident set (after malloc_trim, see resident_bytes) is measured after a warm-up (a tenth
// of the iterations: the backend's worker threads, the CPU driver and the marker rings exist by
// then) and checked against that value while the loop runs and at the end. The bound is
//   kFragmentationBytes + 16 B x (statistics samples added after the warm-up).
// * The samples are growth by design: StatsAccumulator keeps every duration (8 B per region
//   per report, report.hpp) so percentiles are exact; a std::vector may hold up to twice its
//   size while it grows, hence 16 B.
// * 1 MiB covers what does not grow with the iteration count (heap fragmentation, page
//   granularity). Measured on the 2-core dev machine, replay_cycles: +0.60 to +0.65 MiB after
//   10,000 cycles on host and on level_zero (5 runs each), +1.25 MiB at 20,000 and +2.45 MiB at
//   40,000 on level_zero: exactly the 8 B samples. Without malloc_trim, level_zero varied
//   between -0.8 and +3.3 MiB from run to run.
// What it catches: after the warm-up, 27,000 replays keeping 64 bytes each (+1.6 MiB over the
// samples' 0.6 MiB; bound 2.2 MiB), 9,000 dead streams keeping 128 bytes each (+1.1 MiB; bound
// 1.1 MiB), and one host marker set (32 KiB) per dead stream by far: audit row 2.2 measured
// +447 MB on host and +5.2 GB on level_zero.
constexpr uint64_t kFragmentationBytes = 1ull << 20;
constexpr uint64_t kBytesPerSample = 16;

// The resident set after malloc_trim(0) has handed free heap pages back to the kernel, so that
// what the allocator merely caches (it varies with the order threads freed memory in) does not
// count as growth.
uint64_t resident_bytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) {
    fmt::print(stderr, "accgraph-soak: cannot read /proc/self/statm (this test needs Linux)\n");
    std::exit(1);
  }
  return resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

[[noreturn]] void fail(const std::string& message) {
  std::fflush(stdout);
  fmt::print(stderr, "FAILED: {}\n", message);
  std::exit(1);
}

/// Watches the resident set against Note [Soak RSS bound].
class RssWatch {
 public:
  RssWatch(std::string what, uint64_t samples_per_iteration)
      : what_(std::move(what)), samples_per_iteration_(samples_per_iteration) {}

  void start(uint64_t iteration) {
    baseline_ = resident_bytes();
    start_iteration_ = iteration;
    started_ = true;
  }
  bool started() const { return started_; }
  uint64_t bound(uint64_t iteration) const {
    return kFragmentationBytes +
           kBytesPerSample * samples_per_iteration_ * (iteration - start_iteration_);
  }
  /// Fails as soon as the growth exceeds the bound (a leak of megabytes per thousand iterations
  /// would otherwise run the machine out of memory before the end).
  void check(uint64_t iteration) const {
    if (iteration <= start_iteration_) return;
    uint64_t now = resident_bytes();
    uint64_t growth = now > baseline_ ? now - baseline_ : 0;
    if (growth > bound(iteration))
      fail(fmt::format(
          "{}: the resident set grew by {:.1f} MiB between iteration {} and "
          "iteration {} ({:.0f} bytes per iteration; {} -> {} KiB), more than the "
          "bound of {:.1f} MiB (Note [Soak RSS bound] in tests/soak/soak.cpp): "
          "something is kept per iteration",
          what_, growth / 1048576.0, start_iteration_, iteration,
          static_cast<double>(growth) / static_cast<double>(iteration - start_iteration_),
          baseline_ / 1024, now / 1024, bound(iteration) / 1048576.0));
  }
  void report(uint64_t iteration) const {
    uint64_t now = resident_bytes();
    fmt::print(
        "{}: resident set {} KiB after the warm-up (iteration {}), {} KiB at iteration {}: "
        "{:+.2f} MiB, bound {:.2f} MiB\n",
        what_, baseline_ / 1024, start_iteration_, now / 1024, iteration,
        (static_cast<double>(now) - static_cast<double>(baseline_)) / 1048576.0,
        bound(iteration) / 1048576.0);
  }

 private:
  std::string what_;
  uint64_t samples_per_iteration_;
  uint64_t baseline_ = 0;
  uint64_t start_iteration_ = 0;
  bool started_ = false;
};

ProfilerOptions soak_profiler_options() {
  ProfilerOptions options;
  options.keep_reports = 0;  // kept reports grow by design; only the count is checked
  return options;
}

// (a) One stream and one graph: capture three regions, replay kReplays times, reset; repeat.
// Reset collects the graph's pending reports, so delivered() equals the replays so far after
// every cycle, not only after a flush.
void replay_cycles(const std::string& backend, uint64_t cycles) {
  constexpr uint64_t kReplays = 3;
  constexpr uint64_t kRegions = 3;
  const std::string what = fmt::format("replay_cycles on {}", backend);
  Profiler profiler(soak_profiler_options());
  profiler.attach_all();
  Stream stream = Stream::create(backend);
  Buffer a = Buffer::allocate(stream, 4096);
  Buffer b = Buffer::allocate(stream, 4096);
  AcceleratorGraph graph(backend);
  RssWatch rss(what, kRegions * kReplays);
  uint64_t replays = 0;
  for (uint64_t cycle = 0; cycle < cycles; ++cycle) {
    if (cycle == cycles / 10) rss.start(cycle);
    graph.capture_begin(stream);
    {
      auto outer = profiler.region(stream, "cycle");
      {
        auto fill = profiler.region(stream, "fill");
        stream.fill(a, static_cast<uint8_t>(cycle));
      }
      {
        auto copy = profiler.region(stream, "copy");
        stream.copy(b, a);
      }
    }
    graph.capture_end();
    for (uint64_t i = 0; i < kReplays; ++i) graph.replay();
    replays += kReplays;
    graph.reset();
    if (profiler.delivered() != replays)
      fail(
          fmt::format("{}: after cycle {} (capture, {} replays, reset) the profiler delivered {} "
                      "reports for {} replays; reset must collect every pending replay",
                      what, cycle, kReplays, profiler.delivered(), replays));
    if (rss.started() && cycle % 500 == 0) rss.check(cycle);
  }
  profiler.flush();
  if (profiler.delivered() != replays)
    fail(fmt::format("{}: the profiler delivered {} reports for {} replays", what,
                     profiler.delivered(), replays));
  rss.check(cycles);
  rss.report(cycles);
  fmt::print("{}: {} cycles, {} replays, {} reports delivered\n", what, cycles, replays,
             profiler.delivered());
}

// (b) A new Stream per iteration with one eager region around a fill, then the stream dies.
// The profiler (attach_all) outlives all of them; every eager region is one report.
void short_streams(const std::string& backend, uint64_t streams) {
  const std::string what = fmt::format("short_streams on {}", backend);
  Profiler profiler(soak_profiler_options());
  profiler.attach_all();
  Stream keeper = Stream::create(backend);  // the backend's first stream stays for the whole run
  Buffer data = Buffer::allocate(keeper, 4096);
  RssWatch rss(what, 1);
  for (uint64_t i = 0; i < streams; ++i) {
    if (i == streams / 10) rss.start(i);
    {
      Stream stream = Stream::create(backend);
      {
        auto region = profiler.region(stream, "eager");
        stream.fill(data, static_cast<uint8_t>(i));
      }
      stream.synchronize();
    }
    if (rss.started() && i % 250 == 0) {
      profiler.flush();
      if (profiler.delivered() != i + 1)
        fail(
            fmt::format("{}: after {} streams the profiler delivered {} reports; every eager "
                        "region must be delivered",
                        what, i + 1, profiler.delivered()));
      rss.check(i);
    }
  }
  profiler.flush();
  if (profiler.delivered() != streams)
    fail(
        fmt::format("{}: {} streams with one eager region each, but the profiler delivered {} "
                    "reports",
                    what, streams, profiler.delivered()));
  rss.check(streams);
  rss.report(streams);
  fmt::print("{}: {} streams, {} reports delivered\n", what, streams, profiler.delivered());
}

int usage(const std::string& problem) {
  fmt::print(stderr,
             "accgraph-soak: {}\nusage: accgraph-soak --backend NAME --case "
             "replay_cycles|short_streams [--iterations N]\n",
             problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend, which;
  uint64_t iterations = 10000;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i + 1 >= argc) return usage(fmt::format("{} expects a value", arg));
    std::string value = argv[++i];
    if (arg == "--backend") {
      backend = value;
    } else if (arg == "--case") {
      which = value;
    } else if (arg == "--iterations") {
      char* end = nullptr;
      iterations = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || iterations < 10)
        return usage(fmt::format("--iterations expects a whole number >= 10, got '{}'", value));
    } else {
      return usage(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (backend.empty() || which.empty()) return usage("--backend and --case are required");
  if (which != "replay_cycles" && which != "short_streams")
    return usage(fmt::format("unknown case '{}'", which));
  try {
    accgraph::backend(backend);  // unknown or unavailable: an Error that says why
    if (which == "replay_cycles")
      replay_cycles(backend, iterations);
    else
      short_streams(backend, iterations);
  } catch (const std::exception& e) {
    fail(fmt::format("{} on {}: {}", which, backend, e.what()));
  }
  return 0;
}
