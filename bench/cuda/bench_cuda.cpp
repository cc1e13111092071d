// accgraph-bench-cuda: issue 3's benchmarks a-e on one GPU, the device cost per region boundary
// by kind (k), the timing layer v2 measures and issue 21's run-ahead loop (r), every figure a
// ratio measured side by side in one process on the same captured work. Prints a table with the targets; --json FILE.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <cuda.h>  // CUstreamCaptureStatus: the driver's query in (q)
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "timing_seam.hpp"
#include "../common/run_ahead.hpp"
#include "../common/timing_v2.hpp"
#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"  // backend("cuda").create_markers, Backend&
#include "cuda_test_kernels.hpp"

using namespace accgraph;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(2);
  }
}

cudaStream_t native(const Stream& s) { return static_cast<cudaStream_t>(s.native_handle()); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

json results = json::object();
std::vector<std::string> table;

void row(const std::string& text) {
  table.push_back(text);
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

const char* verdict(bool ok) { return ok ? "MET" : "NOT MET"; }

// Enqueues `kernels` empty kernels on the stream (captured or not).
void empty_kernels(Stream& s, int kernels) {
  for (int i = 0; i < kernels; ++i) check(accgraph_test::launch_empty(native(s)), "empty kernel");
}

// (q) What a timed replay on a stream whose native handle was handed out asks the backend
// every launch (Note [Native captures] in core/seam/stream_state.hpp): cudaStreamIsCapturing,
// against cudaGetDevice (a runtime call that reads thread state only). Median of 200 batches of
// 1000 calls, ns per call.
void bench_capture_query() {
  Stream s = Stream::create("cuda");
  cudaStream_t stream = native(s);
  auto per_call = [&](auto call) {
    std::vector<double> batches;
    for (int b = 0; b < 200; ++b) {
      auto t0 = Clock::now();
      for (int i = 0; i < 1000; ++i) call();
      batches.push_back(us_since(t0));  // us per 1000 calls = ns per call
    }
    return median(batches);
  };
  cudaStreamCaptureStatus status;
  int device = 0;
  const double query = per_call([&] { check(cudaStreamIsCapturing(stream, &status), "query"); });
  const double get_device = per_call([&] { check(cudaGetDevice(&device), "cudaGetDevice"); });
  // The driver's own query, through the runtime's entry point (no link to libcuda): what the
  // runtime adds around it.
  double driver = -1;
#if CUDART_VERSION >= 12050
  using StreamIsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check(cudaGetDriverEntryPointByVersion("cuStreamIsCapturing", &entry, 10000, cudaEnableDefault,
                                         &found),
        "cudaGetDriverEntryPointByVersion(cuStreamIsCapturing)");
  if (found == cudaDriverEntryPointSuccess && entry != nullptr) {
    auto driver_query = reinterpret_cast<StreamIsCapturing>(entry);
    CUstreamCaptureStatus driver_status = CU_STREAM_CAPTURE_STATUS_NONE;
    driver = per_call([&] {
      if (driver_query(stream, &driver_status) != CUDA_SUCCESS) {
        std::fprintf(stderr, "cuStreamIsCapturing failed\n");
        std::exit(2);
      }
    });
  }
#endif
  row(
      fmt::format("(q) host ns per call: cudaStreamIsCapturing {:.0f}, cuStreamIsCapturing (driver "
                  "entry point) {:.0f}, cudaGetDevice {:.0f}",
                  query, driver, get_device));
  results["capture_query"] = {{"cudaStreamIsCapturing_ns", query},
                              {"cuStreamIsCapturing_ns", driver},
                              {"cudaGetDevice_ns", get_device}};
}

// (a) AcceleratorGraph::replay vs raw cudaGraphLaunch of the same captured work.
void bench_replay_overhead() {
  row("");
  row("(a) replay host time per call: AcceleratorGraph::replay vs raw cudaGraphLaunch  [target <= "
      "1.05x]");
  row(fmt::format("{:>8} {:>12} {:>12} {:>8} {:>8}", "kernels", "accgraph us", "raw us", "ratio",
                  "target"));
  Stream s = Stream::create("cuda");
  for (int kernels : {1, 10, 100, 1000}) {
    AcceleratorGraph g("cuda");
    g.capture_begin(s);
    empty_kernels(s, kernels);
    g.capture_end();
    cudaGraph_t raw_graph = nullptr;
    cudaGraphExec_t raw_exec = nullptr;
    check(cudaStreamBeginCapture(native(s), cudaStreamCaptureModeGlobal), "raw capture");
    empty_kernels(s, kernels);
    check(cudaStreamEndCapture(native(s), &raw_graph), "raw capture");
    check(cudaGraphInstantiate(&raw_exec, raw_graph, 0), "raw instantiate");
    int batch = kernels >= 1000 ? 10 : 50;
    std::vector<double> ours, raw;
    for (int warm = 0; warm < 3; ++warm) {
      g.replay();
      check(cudaGraphLaunch(raw_exec, native(s)), "raw launch");
    }
    s.synchronize();
    for (int rep = 0; rep < 40; ++rep) {  // alternate, so drift hits both equally
      auto t0 = Clock::now();
      for (int i = 0; i < batch; ++i) g.replay();
      ours.push_back(us_since(t0) / batch);
      s.synchronize();
      t0 = Clock::now();
      for (int i = 0; i < batch; ++i) check(cudaGraphLaunch(raw_exec, native(s)), "raw launch");
      raw.push_back(us_since(t0) / batch);
      s.synchronize();
    }
    double a = median(ours), r = median(raw), ratio = a / r;
    row(fmt::format("{:>8} {:>12.3f} {:>12.3f} {:>7.3f}x {:>8}", kernels, a, r, ratio,
                    verdict(ratio <= 1.05)));
    results["a_replay_overhead"].push_back({{"kernels", kernels},
                                            {"accgraph_us", a},
                                            {"raw_us", r},
                                            {"ratio", ratio},
                                            {"target", 1.05}});
    check(cudaGraphExecDestroy(raw_exec), "raw destroy");
    check(cudaGraphDestroy(raw_graph), "raw destroy");
  }
}

struct TimedGraph {
  std::unique_ptr<timing::Profiler> profiler;  // null: untimed
  std::unique_ptr<AcceleratorGraph> graph;
  std::shared_ptr<size_t> regions_in_last_report = std::make_shared<size_t>(0);
};

// A graph of `regions` regions, each around one kernel produced by `work`.
TimedGraph make_graph(Stream& s, int regions, const std::string& strategy,
                      const std::function<void()>& work, timing::ProfilerOptions options = {}) {
  TimedGraph t;
  t.graph = std::make_unique<AcceleratorGraph>("cuda");
  if (!strategy.empty()) {
    options.marker_strategy = strategy;
    t.profiler = std::make_unique<timing::Profiler>(options);
    // A sink that holds each report, so (c) measures "completion -> report in a user's hands",
    // not only the statistics.
    t.profiler->add_sink([seen = t.regions_in_last_report](const timing::ReplayReport& report) {
      *seen = report.size();
    });
    t.profiler->attach(*t.graph);
  }
  t.graph->capture_begin(s);
  for (int r = 0; r < regions; ++r) {
    if (t.profiler) t.profiler->begin(s, fmt::format("r{}", r));
    work();
    if (t.profiler) t.profiler->end(s);
  }
  t.graph->capture_end();
  return t;
}

const std::vector<std::string> kVariants = {"", "device_timestamps", "external_events"};
std::string variant_name(const std::string& v) { return v.empty() ? "untimed" : v; }

// (b) host launch time and device time per replay; (c) collection latency per replay.
//
// Method (the host ratio used to swing 1.3x-2.3x between runs): the three variants of one size
// are captured up front and measured in interleaved rounds (the order rotating each round), so
// clock and load drift hit all of them alike; the first rounds are warm-up; the host time is
// the median over every single launch of the measured rounds (not of batch means), device time
// the median over rounds of (event span of a 16-launch batch) / 16.
void bench_timed_replay() {
  row("");
  row("(b) timed replay: host launch time and device time per replay  [target device_timestamps "
      "@100: host <= 1.3x untimed, <= 0.8 us device per region]");
  row(fmt::format("{:>8} {:>18} {:>12} {:>8} {:>14} {:>14} {:>10}", "regions", "variant", "host us",
                  "x untimed", "device us", "dev us/region", "target"));
  Stream s = Stream::create("cuda");
  std::vector<json> collection_rows;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  for (int regions : {10, 100, 1000}) {
    const size_t n = kVariants.size();
    std::vector<TimedGraph> graphs;
    for (const std::string& variant : kVariants) {
      timing::ProfilerOptions options;
      options.keep_reports = 0;
      graphs.push_back(make_graph(
          s, regions, variant, [&] { check(accgraph_test::launch_empty(native(s)), "empty"); },
          options));
    }
    const int batch = 16;  // = the default ring depth: no collection inside the timed launches
    const int warmup = 3;
    const int rounds = warmup + (regions >= 1000 ? 12 : 40);
    std::vector<std::vector<double>> host(n), device(n), collect(n);
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < n; ++k) {
        size_t v = (k + static_cast<size_t>(round)) % n;
        TimedGraph& t = graphs[v];
        s.synchronize();
        check(cudaEventRecord(e0, native(s)), "event");
        double launch_us[batch];
        for (int i = 0; i < batch; ++i) {
          auto t0 = Clock::now();
          t.graph->replay();
          launch_us[i] = us_since(t0);
        }
        check(cudaEventRecord(e1, native(s)), "event");
        s.synchronize();
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        double collect_us = 0;
        if (t.profiler) {
          // (c) every replay of the batch has completed: time turning them into reports.
          auto c0 = Clock::now();
          t.profiler->flush();
          collect_us = us_since(c0) / batch;
        }
        if (round < warmup) continue;
        host[v].insert(host[v].end(), launch_us, launch_us + batch);
        device[v].push_back(ms * 1000.0 / batch);
        if (t.profiler) collect[v].push_back(collect_us);
      }
    }
    double untimed_host = median(host[0]), untimed_device = median(device[0]);
    for (size_t v = 0; v < n; ++v) {
      const std::string& variant = kVariants[v];
      double h = median(host[v]), d = median(device[v]);
      double per_region = variant.empty() ? 0 : (d - untimed_device) / regions;
      std::string target = "";
      if (variant == "device_timestamps" && regions == 100)
        target = verdict(h <= 1.3 * untimed_host && per_region <= 0.8);
      row(fmt::format("{:>8} {:>18} {:>12.2f} {:>7.2f}x {:>14.2f} {:>14.3f} {:>10}", regions,
                      variant_name(variant), h, h / untimed_host, d, per_region, target));
      results["b_timed_replay"].push_back({{"regions", regions},
                                           {"variant", variant_name(variant)},
                                           {"host_launch_us", h},
                                           {"host_ratio_vs_untimed", h / untimed_host},
                                           {"host_samples", host[v].size()},
                                           {"device_us_per_replay", d},
                                           {"device_us_added_per_region", per_region}});
      if (!variant.empty())
        collection_rows.push_back(
            {{"regions", regions}, {"variant", variant}, {"us_per_replay", median(collect[v])}});
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  row("");
  row("(c) report collection per replay (replay complete -> report delivered)  [target <= 20 us "
      "@1000 regions]");
  row(fmt::format("{:>8} {:>18} {:>14} {:>10}", "regions", "variant", "us per replay", "target"));
  {
    // The backend's share: TimestampMarkers::read of one finished 1001-marker replay, alone.
    for (const std::string& strategy :
         {std::string("device_timestamps"), std::string("external_events")}) {
      auto markers = backend("cuda").create_markers(0, MarkerOptions{strategy, 2});
      AcceleratorGraph g("cuda");
      g.capture_begin(s);
      markers->begin_sequence(detail::StreamAccess::impl(s));
      for (uint32_t m = 0; m <= 1000; ++m) {
        markers->record(detail::StreamAccess::impl(s), m);
        check(accgraph_test::launch_empty(native(s)), "empty");
      }
      markers->end_sequence(detail::StreamAccess::impl(s));
      g.capture_end();
      std::vector<double> reads;
      std::vector<uint64_t> times(1001);  // the caller's buffer, reused as the profiler does
      for (uint64_t seq = 0; seq < 20; ++seq) {
        markers->before_launch(detail::GraphAccess::impl(g), detail::StreamAccess::impl(s), seq);
        g.replay();
        markers->wait(seq);
        auto t0 = Clock::now();
        markers->read(seq, times.data(), times.size());
        reads.push_back(us_since(t0));
      }
      double us = median(reads);
      row(fmt::format("{:>8} {:>18} {:>14.2f} {:>10}", 1000, strategy + " read()", us,
                      "(backend)"));
      results["c_backend_read"].push_back({{"markers", 1001}, {"variant", strategy}, {"us", us}});
    }
  }
  for (const json& c : collection_rows) {
    int regions = c["regions"];
    double us = c["us_per_replay"];
    std::string target = regions == 1000 ? verdict(us <= 20.0) : "";
    row(fmt::format("{:>8} {:>18} {:>14.2f} {:>10}", regions, c["variant"].get<std::string>(), us,
                    target));
    results["c_collection"].push_back(c);
  }
}

// (d) 1000 back-to-back timed replays, every report kept, vs the same replays untimed. Three
// interleaved rounds (the order rotating), after one warm-up round; the median of each.
void bench_pipelined() {
  row("");
  row("(d) pipelined: 1000 back-to-back replays of 10 regions x ~10 us kernels, every report kept  "
      "[target >= 0.9x untimed throughput]");
  row(fmt::format("{:>18} {:>12} {:>14} {:>10} {:>10}", "variant", "total ms", "replays/s",
                  "x untimed", "target"));
  Stream s = Stream::create("cuda");
  uint64_t* scratch = nullptr;
  check(cudaMalloc(&scratch, 2 * sizeof(uint64_t)), "scratch");
  const size_t n = kVariants.size();
  std::vector<TimedGraph> graphs;
  for (const std::string& variant : kVariants) {
    timing::ProfilerOptions options;
    options.keep_reports = timing::KeepReports::all();
    graphs.push_back(make_graph(
        s, 10, variant,
        [&] { check(accgraph_test::launch_timed_spin(native(s), 10000, scratch), "spin"); },
        options));
  }
  std::vector<std::vector<double>> total_ms(n);
  for (int round = 0; round < 4; ++round) {
    for (size_t k = 0; k < n; ++k) {
      size_t v = (k + static_cast<size_t>(round)) % n;
      TimedGraph& t = graphs[v];
      for (int i = 0; i < 5; ++i) t.graph->replay();
      s.synchronize();
      if (t.profiler) t.profiler->flush();
      auto t0 = Clock::now();
      for (int i = 0; i < 1000; ++i) t.graph->replay();
      s.synchronize();
      if (t.profiler) t.profiler->flush();
      if (round > 0) total_ms[v].push_back(us_since(t0) / 1000.0);
    }
  }
  double untimed_rate = 0;
  for (size_t v = 0; v < n; ++v) {
    const std::string& variant = kVariants[v];
    TimedGraph& t = graphs[v];
    double ms = median(total_ms[v]);
    double rate = 1000.0 / (ms / 1000.0);
    if (variant.empty()) untimed_rate = rate;
    size_t kept = t.profiler ? t.profiler->reports().size() : 0;
    double ratio = rate / untimed_rate;
    row(fmt::format("{:>18} {:>12.2f} {:>14.0f} {:>9.3f}x {:>10}{}", variant_name(variant), ms,
                    rate, ratio, variant.empty() ? "" : verdict(ratio >= 0.9),
                    t.profiler ? fmt::format("  ({} reports)", kept) : ""));
    results["d_pipelined"].push_back({{"variant", variant_name(variant)},
                                      {"total_ms", ms},
                                      {"rounds_ms", total_ms[v]},
                                      {"replays_per_s", rate},
                                      {"ratio_vs_untimed", ratio},
                                      {"reports", kept}});
  }
  cudaFree(scratch);
}

// (e) measured vs true for spin kernels that time themselves with %globaltimer.
void bench_accuracy() {
  row("");
  row("(e) accuracy: region around a spin kernel vs the kernel's own %globaltimer  [target error "
      "<= 1.6 us]");
  row(fmt::format("{:>18} {:>8} {:>12} {:>12} {:>12} {:>10}", "variant", "true us", "measured us",
                  "median err", "max err", "target"));
  Stream s = Stream::create("cuda");
  uint64_t* truth = nullptr;
  check(cudaMallocHost(&truth, 2 * sizeof(uint64_t)), "truth");
  for (const std::string& variant :
       {std::string("device_timestamps"), std::string("external_events")}) {
    for (uint64_t us : {2, 10, 100}) {
      timing::ProfilerOptions options;
      options.delivery = timing::Delivery::Immediate;  // each report is read before the next replay
      options.keep_reports = 0;
      std::vector<double> errors, measured, real;
      TimedGraph t = make_graph(
          s, 1, variant,
          [&] { check(accgraph_test::launch_timed_spin(native(s), us * 1000, truth), "spin"); },
          options);
      double last = 0;
      t.profiler->add_sink([&](const timing::ReplayReport& r) {
        last = static_cast<double>(r.region(0).duration_ns());
      });
      for (int i = 0; i < 51; ++i) {
        t.graph->replay();
        s.synchronize();
        double truth_ns = static_cast<double>(truth[1] - truth[0]);
        if (i == 0) continue;
        measured.push_back(last);
        real.push_back(truth_ns);
        errors.push_back(last - truth_ns);
      }
      double med = median(errors);
      double worst = *std::max_element(errors.begin(), errors.end(), [](double a, double b) {
        return std::abs(a) < std::abs(b);
      });
      row(fmt::format("{:>18} {:>8.2f} {:>12.3f} {:>12.3f} {:>12.3f} {:>10}", variant,
                      median(real) / 1000, median(measured) / 1000, med / 1000, worst / 1000,
                      verdict(std::abs(med) <= 1600)));
      results["e_accuracy"].push_back({{"variant", variant},
                                       {"true_us", median(real) / 1000},
                                       {"measured_us", median(measured) / 1000},
                                       {"median_error_us", med / 1000},
                                       {"max_abs_error_us", worst / 1000}});
    }
  }
  cudaFreeHost(truth);
}

// (k) Device cost per region boundary by the kind of work on each side of it: a graph of 100
// regions, each around one operation of that kind, timed (device_timestamps) against the same
// operations untimed; (timed - untimed) / 101 marker transitions. Rounds interleaved as in (b):
// the median over rounds of (event span of 16 replays) / 16, the first rounds warm-up.
void bench_boundary_kinds() {
  row("");
  row("(k) device cost per region boundary, by kind (100 regions of one operation each, "
      "device_timestamps, (timed - untimed) / 101 transitions)");
  row(fmt::format("{:>34} {:>12} {:>12} {:>16}", "operations", "untimed us", "timed us",
                  "ns per boundary"));
  Stream s = Stream::create("cuda");
  constexpr size_t kBytes = 4096;
  void* src = nullptr;
  void* dst = nullptr;
  uint64_t* stamps = nullptr;  // the spin kernels' own start/end stamps (not read here)
  check(cudaMalloc(&src, kBytes), "copy source");
  check(cudaMalloc(&dst, kBytes), "copy destination");
  check(cudaMalloc(&stamps, 4 * sizeof(uint64_t)), "stamps");
  const cudaStream_t cs = native(s);
  const std::vector<std::pair<std::string, std::function<void()>>> kinds = {
      {"kernel -> kernel (2 us spins)",
       [&] { check(accgraph_test::launch_timed_spin(cs, 2000, stamps), "spin"); }},
      {"PDL kernel -> PDL kernel (2 us)",
       [&] { check(accgraph_test::launch_pdl_spin(cs, 500, 2000, 1, true, stamps), "pdl"); }},
      {"empty kernel -> empty kernel", [&] { check(accgraph_test::launch_empty(cs), "empty"); }},
      {"copy -> copy (4 KiB on device)",
       [&] { check(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, cs), "copy"); }},
      {"fill -> fill (4 KiB memset)",
       [&] { check(cudaMemsetAsync(dst, 0, kBytes, cs), "fill"); }},
  };
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  const int regions = 100, batch = 16, warmup = 3, rounds = warmup + 30;
  for (const auto& [name, work] : kinds) {
    timing::ProfilerOptions options;
    options.keep_reports = 0;
    TimedGraph graphs[2] = {make_graph(s, regions, "", work, options),
                            make_graph(s, regions, "device_timestamps", work, options)};
    std::vector<double> device[2];
    for (int round = 0; round < rounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        const int v = (k + round) % 2;
        s.synchronize();
        check(cudaEventRecord(e0, cs), "event");
        for (int i = 0; i < batch; ++i) graphs[v].graph->replay();
        check(cudaEventRecord(e1, cs), "event");
        s.synchronize();
        float ms = 0;
        check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        if (graphs[v].profiler) graphs[v].profiler->flush();
        if (round >= warmup) device[v].push_back(ms * 1000.0 / batch);
      }
    }
    const double untimed = median(device[0]), timed = median(device[1]);
    const double per_boundary_ns = (timed - untimed) * 1000.0 / (regions + 1);
    row(fmt::format("{:>34} {:>12.2f} {:>12.2f} {:>16.0f}", name, untimed, timed,
                    per_boundary_ns));
    results["k_boundary_kinds"].push_back({{"operations", name},
                                           {"untimed_us_per_replay", untimed},
                                           {"timed_us_per_replay", timed},
                                           {"ns_per_boundary", per_boundary_ns}});
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(stamps);
  cudaFree(dst);
  cudaFree(src);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  size_t memory_replays = 100'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    if (std::strcmp(argv[i], "--memory-replays") == 0 && i + 1 < argc)
      memory_replays = std::strtoull(argv[++i], nullptr, 10);
  }
  try {
    Backend& b = backend("cuda");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::string device = b.devices().at(0).name;
    row(fmt::format(
        "accgraph-bench-cuda: {} | driver CUDA {}.{} | runtime {}.{} | timer resolution {} ns",
        device, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
        b.capabilities(0).timer_resolution_ns));
    results["device"] = device;
    results["driver_cuda"] = driver;
    results["runtime_cuda"] = runtime;
    results["timer_resolution_ns"] = b.capabilities(0).timer_resolution_ns;
    bench_capture_query();
    bench_replay_overhead();
    bench_timed_replay();
    bench_pipelined();
    bench_accuracy();
    bench_boundary_kinds();
    row("");
    row("(v2) timing layer v2 (issue 8), device_timestamps, each figure against its baseline in "
        "this run");
    const auto v2 = accgraph_bench::bench_timing_v2(
        "cuda", "device_timestamps",
        [](Stream& s) { check(accgraph_test::launch_empty(native(s)), "empty"); }, memory_replays,
        [](const std::string& line) { row(line); });
    results["v2"] = accgraph_bench::to_json(v2);
    row("");
    row("(r) run ahead: 400 replays back to back of a graph of 10 regions of 20 us delays, host "
        "time per replay() call, default ProfilerOptions (median of 15 rounds)  [target <= 1.10x, "
        "every report delivered]");
    results["run_ahead"] = accgraph_bench::to_json(accgraph_bench::bench_run_ahead(
        "cuda", [](Stream& s) { s.delay(std::chrono::microseconds(20)); }, 10, 400, 15,
        [](const std::string& line) { row(line); }));
  } catch (const Error& e) {
    std::fprintf(stderr, "accgraph-bench-cuda: %s\n", e.what());
    return e.code() == ErrorCode::Unavailable ? 77 : 1;
  }
  results["table"] = table;
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << results.dump(2) << "\n";
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}
