// accgraph-probe-untimed: what the candidate mechanisms for sampled timing's untimed replays
// cost on this GPU (issue 43 item 2; Note [Sampled replays] in spi/untimed_replay.hpp): a graph
// of W short work kernels with a marker kernel after each, replayed (a) as captured, (b) with the
// markers disabled in the executable (cudaGraphNodeSetEnabled), (c) as a second executable
// instantiated from a clone without them (what the cuda backend's UntimedReplay does), against
// (0) the graph captured without markers. Prints device us per replay (median of rounds) and the
// host cost of toggling every marker node once. CUDA runtime only, no accgraph.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void work_kernel(int* value) { atomicAdd(value, 1); }
__global__ void marker_kernel(unsigned long long* stamp) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *stamp = t;
}

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "accgraph-probe-untimed: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int work = argc > 1 ? std::atoi(argv[1]) : 244;
  const int replays = 200, rounds = 7;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  int* value = nullptr;
  unsigned long long* stamps = nullptr;
  check(cudaMalloc(&value, sizeof(int)), "malloc");
  check(cudaMalloc(&stamps, sizeof(unsigned long long) * work), "malloc");
  auto capture = [&](bool markers) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    for (int i = 0; i < work; ++i) {
      work_kernel<<<1, 32, 0, stream>>>(value);
      if (markers) marker_kernel<<<1, 1, 0, stream>>>(stamps + i);
    }
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    return graph;
  };
  cudaGraph_t plain_graph = capture(false), timed_graph = capture(true);
  // The marker nodes, and a clone without them (each work kernel joined to the next).
  size_t count = 0;
  check(cudaGraphGetNodes(timed_graph, nullptr, &count), "nodes");
  std::vector<cudaGraphNode_t> nodes(count), markers;
  check(cudaGraphGetNodes(timed_graph, nodes.data(), &count), "nodes");
  for (cudaGraphNode_t n : nodes) {
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(n, &p) == cudaSuccess &&
        p.func == reinterpret_cast<void*>(&marker_kernel))
      markers.push_back(n);
  }
  cudaGraph_t clone = nullptr;
  check(cudaGraphClone(&clone, timed_graph), "clone");
  for (cudaGraphNode_t m : markers) {
    cudaGraphNode_t c = nullptr;
    check(cudaGraphNodeFindInClone(&c, m, clone), "find in clone");
    size_t in = 0, out = 0;
    check(cudaGraphNodeGetDependencies(c, nullptr, nullptr, &in), "deps");
    check(cudaGraphNodeGetDependentNodes(c, nullptr, nullptr, &out), "dependents");
    std::vector<cudaGraphNode_t> ins(in), outs(out);
    if (in) check(cudaGraphNodeGetDependencies(c, ins.data(), nullptr, &in), "deps");
    if (out) check(cudaGraphNodeGetDependentNodes(c, outs.data(), nullptr, &out), "dependents");
    for (cudaGraphNode_t a : ins)
      for (cudaGraphNode_t b : outs)
        check(cudaGraphAddDependencies(clone, &a, &b, nullptr, 1), "edge");
    check(cudaGraphDestroyNode(c), "destroy node");
  }
  cudaGraphExec_t plain = nullptr, timed = nullptr, toggled = nullptr, stripped = nullptr;
  check(cudaGraphInstantiate(&plain, plain_graph, 0), "instantiate");
  check(cudaGraphInstantiate(&timed, timed_graph, 0), "instantiate");
  check(cudaGraphInstantiate(&toggled, timed_graph, 0), "instantiate");
  check(cudaGraphInstantiate(&stripped, clone, 0), "instantiate");
  auto toggle = [&](unsigned enabled) {
    for (cudaGraphNode_t m : markers)
      check(cudaGraphNodeSetEnabled(toggled, m, enabled), "enable");
  };
  std::vector<double> toggle_us;
  for (int r = 0; r < 20; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    toggle(r % 2);
    toggle_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  toggle(0);
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  auto device_us = [&](cudaGraphExec_t exec) {
    check(cudaGraphLaunch(exec, stream), "launch");
    check(cudaEventRecord(a, stream), "record");
    for (int i = 0; i < replays; ++i) check(cudaGraphLaunch(exec, stream), "launch");
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    return ms * 1000.0 / replays;
  };
  std::vector<double> p, t, d, s;
  for (int r = 0; r < rounds; ++r) {
    p.push_back(device_us(plain));
    t.push_back(device_us(timed));
    d.push_back(device_us(toggled));
    s.push_back(device_us(stripped));
  }
  const double base = median(p);
  std::printf("accgraph-probe-untimed: %d work kernels, %zu marker kernels, %d replays x %d "
              "rounds\n",
              work, markers.size(), replays, rounds);
  std::printf("  (0) no markers            %8.2f us per replay  1.000x\n", base);
  const char* row = "  %-25s %8.2f us per replay  %.3fx\n";
  std::printf(row, "(a) markers", median(t), median(t) / base);
  std::printf(row, "(b) markers disabled", median(d), median(d) / base);
  std::printf(row, "(c) clone without markers", median(s), median(s) / base);
  std::printf("  toggling all %zu marker nodes once (host): %.1f us (median of 20)\n",
              markers.size(), median(toggle_us));
  return 0;
}
