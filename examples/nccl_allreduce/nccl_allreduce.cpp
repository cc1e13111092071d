// An NCCL all-reduce captured into a CUDA graph through accgraph on every rank (one process per
// GPU), timed per replay with regions on a "compute" and a "comm" lane that carry the metadata
// eager NCCL traces show; each rank writes rank<N>.pftrace with its clock offset, rank 0 merges
// them into all.pftrace and prints how well the ranks' collective ends line up.
//
//   nccl_allreduce --spawn 2 [--replays 1000] [--elements 1048576] [--out DIR]
//   nccl_allreduce --rank R --world-size N --id-file FILE [...]   (one process per rank)
//
// With --spawn N the program forks N ranks itself (rank r on GPU r). Rank 0 writes the NCCL
// unique id to --id-file (default DIR/nccl_id), the others wait for it (60 s).
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/perfetto.hpp"
#include "collective_metadata.hpp"

namespace {

using accgraph::timing::DeviceClockOffset;

struct Options {
  int spawn = 0;
  int rank = -1;
  int world_size = 0;
  std::string id_file;
  std::string out_dir = ".";
  long replays = 1000;
  size_t elements = size_t(1) << 20;
  size_t ring = 0;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "nccl_allreduce: %s\n\nusage: nccl_allreduce --spawn N [--replays R] [--elements "
               "E] [--out DIR] [--ring K]\n       nccl_allreduce --rank R --world-size N "
               "[--id-file FILE] [--replays R] [--elements E] [--out DIR] [--ring K]\n",
               message.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    const auto number = [&](long low, long high) {
      const std::string text = value();
      char* end = nullptr;
      const long v = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < low || v > high)
        usage_error(arg + " expects a whole number from " + std::to_string(low) + " to " +
                    std::to_string(high) + ", got '" + text + "'");
      return v;
    };
    if (arg == "--spawn")
      o.spawn = static_cast<int>(number(1, 64));
    else if (arg == "--rank")
      o.rank = static_cast<int>(number(0, 1 << 20));
    else if (arg == "--world-size")
      o.world_size = static_cast<int>(number(1, 1 << 20));
    else if (arg == "--id-file")
      o.id_file = value();
    else if (arg == "--out")
      o.out_dir = value();
    else if (arg == "--replays")
      o.replays = number(1, 1000000);
    else if (arg == "--elements")
      o.elements = static_cast<size_t>(number(1, 1L << 30));
    else if (arg == "--ring")
      o.ring = static_cast<size_t>(number(1, 65536));
    else
      usage_error("unknown argument '" + arg + "'");
  }
  if (o.spawn == 0 && (o.rank < 0 || o.world_size == 0 || o.rank >= o.world_size))
    usage_error("give --spawn N, or --rank R and --world-size N with R < N");
  if (o.id_file.empty()) o.id_file = o.out_dir + "/nccl_id";
  return o;
}

void cuda_check(cudaError_t error, const char* call) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(error));
}

void nccl_check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw std::runtime_error(std::string(call) + " failed: " + ncclGetErrorString(result) +
                             " (NCCL_DEBUG=INFO says more)");
}

// Rank 0 creates the NCCL id and publishes it atomically (write, then rename); the others poll.
ncclUniqueId exchange_id(const Options& o) {
  ncclUniqueId id{};
  if (o.rank == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string temporary = o.id_file + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof(id.internal));
      if (!out) throw std::runtime_error("cannot write the NCCL id to " + temporary);
    }
    if (std::rename(temporary.c_str(), o.id_file.c_str()) != 0)
      throw std::runtime_error("cannot rename " + temporary + " to " + o.id_file);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    std::ifstream in(o.id_file, std::ios::binary);
    if (in.read(id.internal, sizeof(id.internal))) return id;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("rank " + std::to_string(o.rank) + ": no NCCL id in " + o.id_file +
                               " after 60 s: start rank 0 with the same --id-file");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? name : "";
}

// The work of one step: a fill standing in for compute, then the all-reduce.
void enqueue_step(accgraph::Stream& stream, accgraph::timing::Profiler* profiler, void* scratch,
                  size_t scratch_bytes, const float* send, float* recv, size_t elements,
                  ncclComm_t comm, const Options& o) {
  const auto native = static_cast<cudaStream_t>(stream.native_handle());
  std::vector<int> ranks(static_cast<size_t>(o.world_size));
  for (int r = 0; r < o.world_size; ++r) ranks[static_cast<size_t>(r)] = r;
  if (profiler == nullptr) {
    stream.fill(scratch, 1, scratch_bytes);
    nccl_check(ncclAllReduce(send, recv, elements, ncclFloat32, ncclSum, comm, native),
               "ncclAllReduce");
    return;
  }
  auto step = profiler->region(stream, "step");
  {
    auto compute =
        profiler->region(stream, "compute", {{"bytes", std::to_string(scratch_bytes)}}, "compute");
    stream.fill(scratch, 1, scratch_bytes);
  }
  auto comm_region =
      profiler->region(stream, "all_reduce",
                       nccl_example::collective_metadata("all_reduce", elements, elements,
                                                         ncclFloat32, "default", ranks),
                       "comm");
  nccl_check(ncclAllReduce(send, recv, elements, ncclFloat32, ncclSum, comm, native),
             "ncclAllReduce");
}

int run_rank(const Options& o) {
  int devices = 0;
  cuda_check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  const int device = o.rank % std::max(devices, 1);
  if (devices < 1) throw std::runtime_error("no CUDA device");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t native = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&native, cudaStreamNonBlocking), "cudaStreamCreate");

  const ncclUniqueId id = exchange_id(o);
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, o.world_size, id, o.rank), "ncclCommInitRank");

  int exit_code = 0;
  {
    accgraph::Stream stream = accgraph::Stream::wrap("cuda", device, native);
    // This GPU's clock against CLOCK_REALTIME (Note [Clock calibration]), when the profiler
    // starts, before the timed work.
    constexpr size_t kClockSamples = 200;
    const DeviceClockOffset clock = accgraph::timing::calibrate_clock(stream, kClockSamples);

    const size_t elements = o.elements;
    const size_t scratch_bytes = size_t(4) << 20;
    float *send = nullptr, *recv = nullptr;
    void* scratch = nullptr;
    uint64_t* ends = nullptr;  // all ranks' all-reduce ends, for the alignment figure
    cuda_check(cudaMalloc(&send, elements * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&recv, elements * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&scratch, scratch_bytes), "cudaMalloc");
    cuda_check(cudaMalloc(&ends, sizeof(uint64_t) * 2 * o.replays * o.world_size), "cudaMalloc");
    std::vector<float> host(elements, static_cast<float>(o.rank + 1));
    cuda_check(cudaMemcpy(send, host.data(), elements * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy");

    // Eager warm-up: NCCL sets up its connections on the first collective, not in a capture.
    nccl_check(ncclAllReduce(send, recv, elements, ncclFloat32, ncclSum, comm, native),
               "ncclAllReduce (warm-up)");
    cuda_check(cudaStreamSynchronize(native), "cudaStreamSynchronize");

    accgraph::timing::ProfilerOptions profiler_options;
    profiler_options.keep_reports = static_cast<size_t>(o.replays);
    profiler_options.ring_depth = o.ring;
    accgraph::timing::Profiler profiler(profiler_options);

    // The same step twice: untimed (the cost baseline) and timed. Thread-local capture: NCCL's
    // proxy thread makes CUDA calls while we capture.
    accgraph::AcceleratorGraph untimed("cuda"), timed("cuda");
    untimed.capture_begin(stream, {}, accgraph::CaptureMode::ThreadLocal);
    enqueue_step(stream, nullptr, scratch, scratch_bytes, send, recv, elements, comm, o);
    untimed.capture_end();
    profiler.attach(timed);
    timed.capture_begin(stream, {}, accgraph::CaptureMode::ThreadLocal);
    enqueue_step(stream, &profiler, scratch, scratch_bytes, send, recv, elements, comm, o);
    timed.capture_end();

    // Host time per replay (the launch loop) and device time per replay (events around it).
    cudaEvent_t start = nullptr, stop = nullptr;
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    const auto measure = [&](accgraph::AcceleratorGraph& graph, double& host_us,
                             double& device_us) {
      for (int i = 0; i < 10; ++i) graph.replay();  // warm-up
      cuda_check(cudaStreamSynchronize(native), "cudaStreamSynchronize");
      cuda_check(cudaEventRecord(start, native), "cudaEventRecord");
      const auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < o.replays; ++i) graph.replay();
      const auto t1 = std::chrono::steady_clock::now();
      cuda_check(cudaEventRecord(stop, native), "cudaEventRecord");
      cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o.replays;
      device_us = 1000.0 * ms / o.replays;
    };
    double untimed_host = 0, untimed_device = 0, timed_host = 0, timed_device = 0;
    measure(untimed, untimed_host, untimed_device);
    measure(timed, timed_host, timed_device);
    profiler.flush();
    stream.synchronize();

    // The result: every element is 1 + 2 + ... + world_size.
    cuda_check(cudaMemcpy(host.data(), recv, elements * sizeof(float), cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    const float expected = o.world_size * (o.world_size + 1) / 2.0f;
    const size_t wrong = static_cast<size_t>(
        std::count_if(host.begin(), host.end(), [&](float v) { return v != expected; }));

    // This rank's trace: the last `replays` reports (the timed batch; the warm-ups are older).
    std::vector<accgraph::timing::ReplayReport> reports = profiler.reports();
    accgraph::timing::PerfettoOptions trace_options;
    trace_options.rank = o.rank;
    trace_options.world_size = o.world_size;
    trace_options.host = host_name();
    trace_options.clocks = {clock};
    const std::string trace_path = o.out_dir + "/rank" + std::to_string(o.rank) + ".pftrace";
    {
      std::ofstream out(trace_path, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error("cannot open " + trace_path + " for writing");
      accgraph::timing::write_perfetto_trace(out, reports, trace_options);
    }

    // The all-reduce's end per replay, raw and on the host clock, gathered from every rank.
    std::vector<uint64_t> mine(2 * static_cast<size_t>(o.replays), 0);
    for (size_t k = 0; k < reports.size() && k < static_cast<size_t>(o.replays); ++k) {
      const auto& report = reports[k];
      for (size_t i = 0; i < report.size(); ++i) {
        const auto region = report.region(i);
        if (region.name() != "all_reduce" || !region.measurable()) continue;
        mine[2 * k] = region.end_ns();
        mine[2 * k + 1] = region.end_ns() - static_cast<uint64_t>(clock.offset_ns);
      }
    }
    cuda_check(cudaMemcpy(ends + mine.size() * o.rank, mine.data(), mine.size() * sizeof(uint64_t),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy");
    nccl_check(
        ncclAllGather(ends + mine.size() * o.rank, ends, mine.size(), ncclUint64, comm, native),
        "ncclAllGather");
    std::vector<uint64_t> all(mine.size() * o.world_size);
    cuda_check(cudaStreamSynchronize(native), "cudaStreamSynchronize");
    cuda_check(cudaMemcpy(all.data(), ends, all.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost),
               "cudaMemcpy");

    std::printf(
        "rank %d: GPU %d, clock offset %lld ns +- %llu ns (%zu samples), %zu reports, "
        "%zu wrong elements, trace %s\n",
        o.rank, device, static_cast<long long>(clock.offset_ns),
        static_cast<unsigned long long>(clock.uncertainty_ns), kClockSamples, reports.size(), wrong,
        trace_path.c_str());
    std::printf(
        "rank %d: per replay: untimed host %.2f us, device %.2f us; timed host %.2f us, "
        "device %.2f us\n",
        o.rank, untimed_host, untimed_device, timed_host, timed_device);
    if (o.rank == 0) {
      std::vector<double> raw_spread, aligned_spread;
      for (long k = 0; k < o.replays; ++k) {
        uint64_t raw_min = UINT64_MAX, raw_max = 0, host_min = UINT64_MAX, host_max = 0;
        bool complete = true;
        for (int r = 0; r < o.world_size; ++r) {
          const uint64_t raw = all[mine.size() * r + 2 * k];
          const uint64_t host_time = all[mine.size() * r + 2 * k + 1];
          if (raw == 0) complete = false;
          raw_min = std::min(raw_min, raw);
          raw_max = std::max(raw_max, raw);
          host_min = std::min(host_min, host_time);
          host_max = std::max(host_max, host_time);
        }
        if (!complete) continue;
        raw_spread.push_back((raw_max - raw_min) / 1000.0);
        aligned_spread.push_back((host_max - host_min) / 1000.0);
      }
      std::printf(
          "all-reduce end spread across ranks over %zu replays: raw median %.2f us (p95 "
          "%.2f), clock-aligned median %.2f us (p95 %.2f)\n",
          aligned_spread.size(), median(raw_spread), percentile(raw_spread, 0.95),
          median(aligned_spread), percentile(aligned_spread, 0.95));
    }
    // Every rank's trace is written (the all-gather above came after the writes): merge.
    nccl_check(ncclAllReduce(send, recv, 1, ncclFloat32, ncclSum, comm, native), "barrier");
    cuda_check(cudaStreamSynchronize(native), "cudaStreamSynchronize");
    if (o.rank == 0) {
      std::vector<std::string> inputs;
      for (int r = 0; r < o.world_size; ++r)
        inputs.push_back(o.out_dir + "/rank" + std::to_string(r) + ".pftrace");
      const std::string merged_path = o.out_dir + "/all.pftrace";
      std::ofstream out(merged_path, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error("cannot open " + merged_path + " for writing");
      const auto summary = accgraph::timing::merge_perfetto_traces(out, inputs);
      std::printf("merged %zu rank traces into %s (alignment uncertainty +- %llu ns)\n",
                  summary.ranks.size(), merged_path.c_str(),
                  static_cast<unsigned long long>(summary.alignment_uncertainty_ns));
      for (const std::string& w : summary.warnings) std::printf("warning: %s\n", w.c_str());
    }
    if (wrong != 0) exit_code = 1;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(ends);
    cudaFree(scratch);
    cudaFree(recv);
    cudaFree(send);
  }
  nccl_check(ncclCommDestroy(comm), "ncclCommDestroy");
  cuda_check(cudaStreamDestroy(native), "cudaStreamDestroy");
  return exit_code;
}

int run_rank_reporting(const Options& o) {
  try {
    return run_rank(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_allreduce: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::error_code mkdir_error;
  std::filesystem::create_directories(o.out_dir, mkdir_error);
  if (mkdir_error) {
    std::fprintf(stderr, "nccl_allreduce: cannot create --out %s: %s\n", o.out_dir.c_str(),
                 mkdir_error.message().c_str());
    return 1;
  }
  if (o.spawn == 0) return run_rank_reporting(o);
  // One child per rank; nothing CUDA happens in the parent (a CUDA context does not survive a
  // fork). A stale id file from an earlier run would hand the ranks an old id: remove it first.
  std::remove(o.id_file.c_str());
  std::vector<pid_t> children;
  for (int r = 0; r < o.spawn; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("nccl_allreduce: fork");
      return 1;
    }
    if (pid == 0) {
      Options child = o;
      child.spawn = 0;
      child.rank = r;
      child.world_size = o.spawn;
      const int code = run_rank_reporting(child);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    children.push_back(pid);
  }
  // When a rank fails the others would wait for it forever (in ncclCommInitRank or a
  // collective): stop them.
  int failed = 0;
  for (size_t running = children.size(); running > 0; --running) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (failed++ == 0)
      for (pid_t other : children)
        if (other != pid) kill(other, SIGTERM);
  }
  if (failed != 0) std::fprintf(stderr, "nccl_allreduce: %d rank(s) failed\n", failed);
  return failed == 0 ? 0 : 1;
}
