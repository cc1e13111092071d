// The timing layer v2 measures (issue 8), shared by accgraph-bench-cuda and accgraph-bench-host:
// every figure is a ratio or a difference against a baseline measured side by side in the same
// run, in interleaved rounds (medians). Numbers, not pass/fail.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "timing_seam.hpp"
#include "stats_internal.hpp"  // detail::stats_thread_counters
#include "accgraph/accgraph.hpp"

namespace accgraph_bench {

using BenchClock = std::chrono::steady_clock;

inline double v2_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline double v2_ns_since(BenchClock::time_point t0) {
  return std::chrono::duration<double, std::nano>(BenchClock::now() - t0).count();
}

inline double rss_mib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// Waits (up to 10 s) until the statistics threads (or add() itself, their queue full) folded a
// batch more than `before` counted: the one the flush after it handed over.
inline bool v2_wait_for_stats_thread(const accgraph::detail::StatsThreadCounters& before) {
  for (int i = 0; i < 100000; ++i) {
    const accgraph::detail::StatsThreadCounters now = accgraph::detail::stats_thread_counters();
    if (now.thread_batches + now.add_batches > before.thread_batches + before.add_batches)
      return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

struct TimingV2Results {
  double collect_stats_on_us = 0, collect_stats_off_us = 0;
  double collect_stats_raw_us = 0;     // stats on, marker overhead not subtracted
  double collect_stats_inline_us = 0;  // stats on, stats_thread = false
  double stats_thread_cpu_us = 0;      // the statistics thread's CPU per replay (stats on)
  double raw_markers_host_ns = 0, profiler_host_ns = 0;
  double profiler_inline_stats_host_ns = 0;  // the same with stats_thread = false
  double profiler_quiet_stream_host_ns = 0;  // replayed on a stream not handed out natively
  // v2-2 by a launch's place in its batch: the first 4 after the round's flush (or the raw
  // markers' wait), and the last 8.
  double raw_first_ns = 0, profiler_first_ns = 0, raw_last_ns = 0, profiler_last_ns = 0;
  // v2-2 paired by round: the median over rounds of (the round's median through the profiler -
  // the same round's median raw), which cancels the host's slower and faster phases (they move
  // every figure of a round alike); on the bench's stream and on `quiet`.
  double profiler_paired_ns = 0, quiet_stream_paired_ns = 0;
  double untimed_host_ns = 0, untimed_with_profiler_host_ns = 0;
  double rss_growth_mib = 0;
  size_t memory_replays = 0;
};

// The figures as the benches' --json output writes them.
inline nlohmann::json to_json(const TimingV2Results& v2) {
  return {{"collect_stats_on_us", v2.collect_stats_on_us},
          {"collect_stats_off_us", v2.collect_stats_off_us},
          {"collect_stats_raw_us", v2.collect_stats_raw_us},
          {"collect_stats_inline_us", v2.collect_stats_inline_us},
          {"stats_thread_cpu_us", v2.stats_thread_cpu_us},
          {"raw_markers_host_ns", v2.raw_markers_host_ns},
          {"profiler_host_ns", v2.profiler_host_ns},
          {"profiler_inline_stats_host_ns", v2.profiler_inline_stats_host_ns},
          {"profiler_quiet_stream_host_ns", v2.profiler_quiet_stream_host_ns},
          {"raw_first_ns", v2.raw_first_ns},
          {"profiler_first_ns", v2.profiler_first_ns},
          {"raw_last_ns", v2.raw_last_ns},
          {"profiler_last_ns", v2.profiler_last_ns},
          {"profiler_paired_ns", v2.profiler_paired_ns},
          {"quiet_stream_paired_ns", v2.quiet_stream_paired_ns},
          {"untimed_host_ns", v2.untimed_host_ns},
          {"untimed_with_profiler_host_ns", v2.untimed_with_profiler_host_ns},
          {"rss_growth_mib", v2.rss_growth_mib},
          {"memory_replays", v2.memory_replays}};
}

// `backend`: a backend name; `strategy`: its marker strategy ("" = default); `work(stream)`
// enqueues one unit of work (one kernel) on the stream.
inline TimingV2Results bench_timing_v2(const std::string& backend, const std::string& strategy,
                                       const std::function<void(accgraph::Stream&)>& work,
                                       size_t memory_replays,
                                       const std::function<void(const std::string&)>& print) {
  using namespace accgraph;
  constexpr int kBatch = 16;  // = the ring depth: no collection inside the timed launches
  TimingV2Results out;
  Stream s = Stream::create(backend);
  auto options_for = [&](bool stats) {
    timing::ProfilerOptions o;
    o.marker_strategy = strategy;
    o.ring_depth = kBatch;
    o.keep_reports = 0;
    o.collect_stats = stats;
    return o;
  };
  struct Timed {
    std::unique_ptr<timing::Profiler> profiler;
    std::unique_ptr<AcceleratorGraph> graph;
  };
  auto timed_graph = [&](int regions, timing::ProfilerOptions o) {
    Timed t;
    t.profiler = std::make_unique<timing::Profiler>(o);
    size_t sunk = 0;
    t.profiler->add_sink([sunk](const timing::ReplayReport& r) mutable { sunk += r.size(); });
    t.graph = std::make_unique<AcceleratorGraph>(backend);
    t.profiler->attach(*t.graph);
    t.graph->capture_begin(s);
    for (int r = 0; r < regions; ++r) {
      auto region = t.profiler->region(s, "r" + std::to_string(r));
      work(s);
    }
    t.graph->capture_end();
    return t;
  };

  // (v2-1) collection and delivery per replay at 1000 regions, statistics on and off, on with
  // the marker overhead not subtracted (Note [Marker overhead]: it changes the durations the
  // statistics fold, and so how many sketch buckets each region's series spans) and on with the
  // fold on the flushing thread (stats_thread = false). With the statistics thread (the default)
  // flush() only stages; the fold's cost moves to that thread: its CPU time per replay, read
  // once it has folded the batch each flush hands it (16 replays: one stage), is shown beside.
  {
    timing::ProfilerOptions raw_options = options_for(true);
    raw_options.subtract_marker_overhead = false;
    timing::ProfilerOptions inline_options = options_for(true);
    inline_options.stats_thread = false;
    constexpr int kConfigs = 4;
    Timed configs[kConfigs] = {timed_graph(1000, options_for(true)),
                               timed_graph(1000, options_for(false)),
                               timed_graph(1000, raw_options), timed_graph(1000, inline_options)};
    const bool threaded[kConfigs] = {true, false, true, false};
    std::vector<double> us[kConfigs], thread_cpu_us;
    for (int round = 0; round < 15; ++round)
      for (int k = 0; k < kConfigs; ++k) {
        const int c = (round + k) % kConfigs;
        for (int i = 0; i < kBatch; ++i) configs[c].graph->replay();
        s.synchronize();
        const accgraph::detail::StatsThreadCounters before =
            accgraph::detail::stats_thread_counters();
        auto t0 = BenchClock::now();
        configs[c].profiler->flush();
        const double flush_ns = v2_ns_since(t0);
        if (threaded[c] && !v2_wait_for_stats_thread(before)) {
          print("(v2-1) the statistics thread did not fold its batch within 10 s: skipped");
          continue;
        }
        if (round < 3) continue;
        us[c].push_back(flush_ns / 1000.0 / kBatch);
        if (c == 0) {
          const accgraph::detail::StatsThreadCounters after =
              accgraph::detail::stats_thread_counters();
          thread_cpu_us.push_back(static_cast<double>(after.cpu_ns - before.cpu_ns) / 1000.0 /
                                  kBatch);
        }
      }
    out.collect_stats_on_us = v2_median(us[0]);
    out.collect_stats_off_us = v2_median(us[1]);
    out.collect_stats_raw_us = v2_median(us[2]);
    out.collect_stats_inline_us = v2_median(us[3]);
    out.stats_thread_cpu_us = v2_median(thread_cpu_us);
    print(fmt::format(
        "(v2-1) collection+delivery per replay, 1000 regions: stats on {:.2f} us  [target <= 5] "
        "(+ {:.2f} us CPU per replay on the statistics thread; stats_thread=false: {:.2f} us), "
        "stats off {:.2f} us  [target <= 2]; stats on, marker overhead not subtracted {:.2f} us",
        out.collect_stats_on_us, out.stats_thread_cpu_us, out.collect_stats_inline_us,
        out.collect_stats_off_us, out.collect_stats_raw_us));
  }

  // (v2-2) the profiler's host overhead per timed replay (100 regions) beyond the launch of the
  // same graph with the same N+1 markers launched raw through the backend's TimestampMarkers.
  {
    auto markers = s.backend().create_markers(s.device(), MarkerOptions{strategy, kBatch});
    AcceleratorGraph raw(backend);
    raw.capture_begin(s);
    StreamImpl& si = detail::StreamAccess::impl(s);
    markers->begin_sequence(si);
    markers->record(si, 0);
    for (uint32_t m = 1; m <= 100; ++m) {
      work(s);
      markers->record(si, m);
    }
    markers->end_sequence(si);
    raw.capture_end();
    // Also with the statistics folded on the flushing thread (stats_thread = false): with the
    // thread on, each round's flush() wakes it to fold while the next round launches.
    timing::ProfilerOptions inline_options = options_for(true);
    inline_options.stats_thread = false;
    // And replayed on a stream whose native handle was never handed out: `work` may launch
    // through the capture stream's handle (the cuda bench's kernels), and a timed replay on such
    // a stream asks the backend whether it captures (Note [Native captures] in
    // core/seam/stream_state.hpp; cudaStreamIsCapturing), which `quiet` needs not.
    Stream quiet = Stream::create(backend);
    Timed timed[3] = {timed_graph(100, options_for(true)), timed_graph(100, inline_options),
                      timed_graph(100, options_for(true))};
    std::vector<double> ns[4];  // raw, through the profiler, stats_thread off, on `quiet`
    // Where the difference goes: the first launches after the round's flush (caches the flush
    // and the statistics thread's fold used, a woken thread) or every launch (the launch path).
    std::vector<double> first[2], last[2];  // raw, through the profiler
    std::vector<double> round_median[4];    // per round, as ns[]
    uint64_t seq = 0;
    for (int round = 0; round < 43; ++round)
      for (int k = 0; k < 4; ++k) {
        const int c = (round + k) % 4;
        std::vector<double> launches;
        for (int i = 0; i < kBatch; ++i) {
          auto t0 = BenchClock::now();
          if (c == 0) {
            markers->before_launch(detail::GraphAccess::impl(raw), si, seq);
            raw.replay();
            markers->after_launch(detail::GraphAccess::impl(raw), si, seq);
            ++seq;
          } else if (c == 3) {
            timed[2].graph->replay(quiet);
          } else {
            timed[c - 1].graph->replay();
          }
          launches.push_back(v2_ns_since(t0));
        }
        (c == 3 ? quiet : s).synchronize();
        if (c == 0) {
          markers->wait(seq - 1);
        } else {
          timed[c - 1].profiler->flush();
        }
        if (round >= 3) {
          round_median[c].push_back(v2_median(launches));
          ns[c].insert(ns[c].end(), launches.begin(), launches.end());
          if (c < 2) {
            first[c].insert(first[c].end(), launches.begin(), launches.begin() + 4);
            last[c].insert(last[c].end(), launches.end() - 8, launches.end());
          }
        }
      }
    out.raw_markers_host_ns = v2_median(ns[0]);
    out.profiler_host_ns = v2_median(ns[1]);
    out.profiler_inline_stats_host_ns = v2_median(ns[2]);
    print(fmt::format(
        "(v2-2) host per timed replay, 100 regions: markers raw {:.0f} ns, through the profiler "
        "{:.0f} ns: +{:.0f} ns  [target <= 100 ns]; stats_thread=false: {:.0f} ns (+{:.0f} ns)",
        out.raw_markers_host_ns, out.profiler_host_ns,
        out.profiler_host_ns - out.raw_markers_host_ns, out.profiler_inline_stats_host_ns,
        out.profiler_inline_stats_host_ns - out.raw_markers_host_ns));
    out.profiler_quiet_stream_host_ns = v2_median(ns[3]);
    print(
        fmt::format("(v2-2) the same replayed on a stream whose native handle was never handed "
                    "out (no capture query): {:.0f} ns ({:+.0f} ns)",
                    out.profiler_quiet_stream_host_ns,
                    out.profiler_quiet_stream_host_ns - out.raw_markers_host_ns));
    std::vector<double> paired, quiet_paired;
    for (size_t r = 0; r < round_median[0].size(); ++r) {
      paired.push_back(round_median[1][r] - round_median[0][r]);
      quiet_paired.push_back(round_median[3][r] - round_median[0][r]);
    }
    out.profiler_paired_ns = v2_median(paired);
    out.quiet_stream_paired_ns = v2_median(quiet_paired);
    print(
        fmt::format("(v2-2) paired by round (median over {} rounds of the round's difference, "
                    "which cancels the host's phases): {:+.0f} ns; on the quiet stream {:+.0f} ns",
                    paired.size(), out.profiler_paired_ns, out.quiet_stream_paired_ns));
    out.raw_first_ns = v2_median(first[0]);
    out.profiler_first_ns = v2_median(first[1]);
    out.raw_last_ns = v2_median(last[0]);
    out.profiler_last_ns = v2_median(last[1]);
    print(fmt::format(
        "(v2-2) by place in the batch of {}: launches 1-4 after the flush: raw {:.0f} ns, "
        "profiler {:.0f} ns ({:+.0f}); launches {}-{}: raw {:.0f} ns, profiler {:.0f} ns ({:+.0f})",
        kBatch, out.raw_first_ns, out.profiler_first_ns, out.profiler_first_ns - out.raw_first_ns,
        kBatch - 7, kBatch, out.raw_last_ns, out.profiler_last_ns,
        out.profiler_last_ns - out.raw_last_ns));
  }

  // (v2-3) a graph that is not timed, replayed with and without a profiler in the process (one
  // that times another graph and has attach_all on for later captures).
  {
    AcceleratorGraph untimed(backend);
    untimed.capture_begin(s);
    for (int k = 0; k < 10; ++k) work(s);
    untimed.capture_end();
    std::vector<double> without, with;
    for (int round = 0; round < 43; ++round)
      for (int k = 0; k < 2; ++k) {
        const bool profiled = (round + k) % 2 == 1;
        std::unique_ptr<Timed> other;
        if (profiled) {
          other = std::make_unique<Timed>(timed_graph(10, options_for(true)));
          other->profiler->attach_all();
        }
        s.synchronize();
        std::vector<double> launches;
        for (int i = 0; i < kBatch; ++i) {
          auto t0 = BenchClock::now();
          untimed.replay();
          launches.push_back(v2_ns_since(t0));
        }
        s.synchronize();
        if (round >= 3) {
          auto& into = profiled ? with : without;
          into.insert(into.end(), launches.begin(), launches.end());
        }
      }
    out.untimed_host_ns = v2_median(without);
    out.untimed_with_profiler_host_ns = v2_median(with);
    print(
        fmt::format("(v2-3) untimed graph (10 kernels) host per replay: no profiler {:.0f} ns, "
                    "a profiler in the process {:.0f} ns: {:.3f}x  [target <= 1.01x]",
                    out.untimed_host_ns, out.untimed_with_profiler_host_ns,
                    out.untimed_with_profiler_host_ns / out.untimed_host_ns));
  }

  // (v2-4) memory: timed replays of 100 regions with keep_reports = 0, RSS after a warm-up of
  // 10,000 replays and after `memory_replays` more.
  {
    Timed t = timed_graph(100, options_for(true));
    for (int i = 0; i < 10000; ++i) t.graph->replay();
    t.profiler->flush();
    const double before = rss_mib();
    auto t0 = BenchClock::now();
    for (size_t i = 0; i < memory_replays; ++i) t.graph->replay();
    t.profiler->flush();
    const double seconds = v2_ns_since(t0) / 1e9;
    out.rss_growth_mib = rss_mib() - before;
    out.memory_replays = memory_replays;
    print(
        fmt::format("(v2-4) {} timed replays of 100 regions, keep_reports=0: RSS {:.2f} MiB -> "
                    "{:.2f} MiB, growth {:.3f} MiB  [target < 1 MB] ({:.1f} s, {} reports)",
                    memory_replays, before, before + out.rss_growth_mib, out.rss_growth_mib,
                    seconds, t.profiler->delivered()));
  }
  return out;
}

}  // namespace accgraph_bench
