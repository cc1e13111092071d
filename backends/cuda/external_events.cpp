// CUDA timestamp markers, the external events strategy (the blog's mechanism):
// cudaEventRecordExternal nodes rotated per launch. The default strategy, device timestamps, is
// in markers.cpp; both sit behind the one SPI (Note [Marker ring] in backend.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_graph.hpp"
#include "cuda_kernels.hpp"
#include "cuda_markers.hpp"
#include "cuda_stream.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

// Each ring slot has its own events (one per marker plus an end event). A capture records slot
// 0's events as external event record nodes; before each launch the nodes are re-pointed at the
// launch's slot with cudaGraphExecEventRecordNodeSetEvent (about 0.1-0.2 us per node), so K
// launches can be in flight without overwriting each other's events.
//
// Times are put on the %globaltimer clock through a reference pair (event, kernel reading
// %globaltimer, event) taken at creation and renewed every second of use, because
// cudaEventElapsedTime returns float milliseconds, whose precision falls as the interval grows.
// Durations within a sequence are differences of nearby events (no such loss).
class ExternalEventMarkers final : public TimestampMarkers {
 public:
  // Nothing is created here: the events, the reference pair and its pinned word come with the
  // first sequence (a set that never records costs nothing), the marker events as record()
  // reaches them.
  ExternalEventMarkers(int device, size_t ring, uint64_t resolution_ns)
      : device_(device), ring_(ring), resolution_ns_(resolution_ns), events_(ring), end_(ring) {}

  ~ExternalEventMarkers() override { release(); }

  std::string strategy() const override { return kStrategyExternalEvents; }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return resolution_ns_; }

  void begin_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "begin_sequence");
    DeviceGuard guard(stream.device());
    ensure_ready();
    if (stream_is_capturing(stream.handle())) {
      recording_slot_ = 0;  // captured events are re-pointed per launch (before_launch)
      capturing_ = true;
    } else {
      recording_slot_ = launched_ % ring_;
      ++launched_;
      capturing_ = false;
    }
  }

  void record(StreamImpl& stream_impl, uint32_t marker) override {
    if (marker >= kMarkerCapacity) throw_too_many_markers(marker);
    CudaStream& stream = as_cuda_stream(stream_impl, "record");
    DeviceGuard guard(stream.device());
    ensure_events(marker + 1);
    cudaEvent_t event = events_[recording_slot_][marker];
    if (capturing_) {
      ACCGRAPH_CUDA_CHECK(cudaEventRecordWithFlags(event, stream.handle(), cudaEventRecordExternal),
                          "record");
    } else {
      ACCGRAPH_CUDA_CHECK(cudaEventRecord(event, stream.handle()), "record");
    }
  }

  void end_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "end_sequence");
    DeviceGuard guard(stream.device());
    cudaEvent_t event = end_[recording_slot_];
    if (capturing_) {
      ACCGRAPH_CUDA_CHECK(cudaEventRecordWithFlags(event, stream.handle(), cudaEventRecordExternal),
                          "end_sequence");
    } else {
      ACCGRAPH_CUDA_CHECK(cudaEventRecord(event, stream.handle()), "end_sequence");
    }
    capturing_ = false;
  }

  void before_launch(GraphImplInterface& graph_impl, StreamImpl&, uint64_t sequence) override {
    auto* graph = dynamic_cast<CudaGraph*>(&graph_impl);
    if (graph == nullptr)
      throw Error(ErrorCode::Unsupported,
                  "before_launch: external_events markers re-point event nodes in an executable "
                  "accgraph instantiated, and this graph's executable belongs to its owner (a "
                  "ForeignGraph): time it with the device_timestamps strategy",
                  kBackendName);
    launched_ = sequence + 1;
    Binding& binding = bindings_[graph];
    if (binding.generation != graph->generation()) {
      binding = Binding{};
      binding.generation = graph->generation();
      for (size_t i = 0; i < count_; ++i)
        binding.nodes.push_back(graph->event_record_node(events_[0][i]));
      binding.end = graph->event_record_node(end_[0]);
    }
    size_t slot = sequence % ring_;
    if (binding.bound_slot == slot || binding.end == nullptr) return;
    cudaGraphExec_t exec = graph->exec();
    for (size_t i = 0; i < binding.nodes.size(); ++i) {
      if (binding.nodes[i] == nullptr) continue;
      ACCGRAPH_CUDA_CHECK(
          cudaGraphExecEventRecordNodeSetEvent(exec, binding.nodes[i], events_[slot][i]),
          "before_launch: rotating the marker events");
    }
    ACCGRAPH_CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(exec, binding.end, end_[slot]),
                        "before_launch: rotating the marker events");
    binding.bound_slot = slot;
  }

  bool is_complete(uint64_t sequence) override {
    if (ref_host_ == nullptr) return false;  // no sequence has begun
    // Note [Capture-mode rules]: the collector asks while other threads may capture in Global
    // mode, which refuses (and is invalidated by) a query in the default mode; our own event
    // is no part of any capture.
    RelaxedCaptureModeGuard relaxed;
    cudaError_t err = cudaEventQuery(end_[sequence % ring_]);
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    throw_cuda_error(err, "cudaEventQuery",
                     fmt::format("is_complete of marker sequence {}", sequence));
  }

  void wait(uint64_t sequence) override {
    if (ref_host_ == nullptr)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("wait: marker sequence {} was never begun on this marker set: wait "
                              "only for sequences that were launched",
                              sequence),
                  kBackendName);
    // A graph dropped during another capture collects its last replays here (Note [Teardown
    // during a capture]): waiting for an event of our own is not part of that capture.
    RelaxedCaptureModeGuard relaxed;
    ACCGRAPH_CUDA_CHECK(cudaEventSynchronize(end_[sequence % ring_]),
                        fmt::format("waiting for marker sequence {}", sequence));
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (count > count_)
      throw Error(
          ErrorCode::InvalidArgument,
          fmt::format("read: {} markers asked for but only {} were recorded", count, count_),
          kBackendName);
    if (count == 0) return;
    RelaxedCaptureModeGuard relaxed;  // Note [Capture-mode rules]: the collector's read
    const std::vector<cudaEvent_t>& slot = events_[sequence % ring_];
    float since_ref_ms = 0;
    ACCGRAPH_CUDA_CHECK(cudaEventElapsedTime(&since_ref_ms, ref_before_, slot[0]),
                        "read: placing the sequence on the clock");
    auto base =
        static_cast<int64_t>(ref_ns_) + std::llround(static_cast<double>(since_ref_ms) * 1e6);
    times[0] = static_cast<uint64_t>(base);
    for (size_t i = 1; i < count; ++i) {
      float ms = 0;
      ACCGRAPH_CUDA_CHECK(cudaEventElapsedTime(&ms, slot[0], slot[i]), "read: marker times");
      times[i] = static_cast<uint64_t>(base + std::llround(static_cast<double>(ms) * 1e6));
    }
    if (since_ref_ms > 1000.0f) anchor();  // keep the float interval short for later reads
  }

 private:
  struct Binding {
    uint64_t generation = ~0ull;
    std::vector<cudaGraphNode_t> nodes;
    cudaGraphNode_t end = nullptr;
    size_t bound_slot = ~size_t{0};
  };

  // The end events and the reference pair, at the first sequence (possibly inside a capture).
  void ensure_ready() {
    if (ref_host_ != nullptr) return;
    RelaxedCaptureModeGuard relaxed;
    for (cudaEvent_t& e : end_)
      if (e == nullptr)
        ACCGRAPH_CUDA_CHECK(cudaEventCreate(&e), "external_events markers: creating events");
    if (ref_before_ == nullptr)
      ACCGRAPH_CUDA_CHECK(cudaEventCreate(&ref_before_),
                          "external_events markers: creating events");
    if (ref_after_ == nullptr)
      ACCGRAPH_CUDA_CHECK(cudaEventCreate(&ref_after_), "external_events markers: creating events");
    uint64_t* ref_host = nullptr;
    ACCGRAPH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ref_host), sizeof(uint64_t),
                                      cudaHostAllocMapped | cudaHostAllocPortable),
                        "external_events markers: allocating the reference");
    ref_host_ = ref_host;
    try {
      anchor();
    } catch (...) {
      ACCGRAPH_CUDA_LOG(cudaFreeHost(ref_host_), "external_events markers");
      ref_host_ = nullptr;  // the next sequence tries again
      throw;
    }
  }

  void ensure_events(size_t count) {
    if (count <= count_) return;
    RelaxedCaptureModeGuard relaxed;  // first recorded inside a capture
    size_t target = std::max(count, count_ * 2);
    for (auto& slot : events_) {
      while (slot.size() < target) {
        cudaEvent_t e = nullptr;
        ACCGRAPH_CUDA_CHECK(cudaEventCreate(&e), "external_events markers: creating events");
        slot.push_back(e);
      }
    }
    count_ = target;
  }

  // Reference pair: %globaltimer read between two events; the timer value is taken to be at the
  // midpoint of the two event timestamps.
  void anchor() {
    RelaxedCaptureModeGuard relaxed;
    DeviceGuard guard(device_);
    PrivateStream stream;
    uint64_t* ref_device = nullptr;
    ACCGRAPH_CUDA_CHECK(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&ref_device), ref_host_, 0),
        "external_events markers: mapping the reference");
    ACCGRAPH_CUDA_CHECK(cudaEventRecord(ref_before_, stream.get()),
                        "external_events markers: reference");
    ACCGRAPH_CUDA_CHECK(launch_write_globaltimer(stream.get(), ref_device),
                        "external_events markers: reference");
    ACCGRAPH_CUDA_CHECK(cudaEventRecord(ref_after_, stream.get()),
                        "external_events markers: reference");
    ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(stream.get()), "external_events markers: reference");
    float span_ms = 0;
    ACCGRAPH_CUDA_CHECK(cudaEventElapsedTime(&span_ms, ref_before_, ref_after_),
                        "external_events markers: reference");
    uint64_t timer = *reinterpret_cast<volatile uint64_t*>(ref_host_);
    ref_ns_ = timer - static_cast<uint64_t>(std::llround(static_cast<double>(span_ms) * 1e6 / 2));
  }

  void release() noexcept {
    // Note [Teardown during a capture]
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    for (auto& slot : events_)
      for (cudaEvent_t e : slot)
        ACCGRAPH_CUDA_LOG(cudaEventDestroy(e), "external_events markers: destroying events");
    events_.clear();
    for (cudaEvent_t e : end_)
      if (e != nullptr)
        ACCGRAPH_CUDA_LOG(cudaEventDestroy(e), "external_events markers: destroying events");
    end_.clear();
    if (ref_before_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaEventDestroy(ref_before_), "external_events markers");
    if (ref_after_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaEventDestroy(ref_after_), "external_events markers");
    if (ref_host_ != nullptr) ACCGRAPH_CUDA_LOG(cudaFreeHost(ref_host_), "external_events markers");
    ref_before_ = ref_after_ = nullptr;
    ref_host_ = nullptr;
  }

  int device_;
  size_t ring_;
  uint64_t resolution_ns_;
  std::vector<std::vector<cudaEvent_t>> events_;  // [slot][marker]
  std::vector<cudaEvent_t> end_;                  // [slot]
  size_t count_ = 0;                              // events per slot
  size_t recording_slot_ = 0;
  bool capturing_ = false;
  uint64_t launched_ = 0;
  std::unordered_map<const CudaGraph*, Binding> bindings_;
  cudaEvent_t ref_before_ = nullptr;
  cudaEvent_t ref_after_ = nullptr;
  uint64_t* ref_host_ = nullptr;
  uint64_t ref_ns_ = 0;
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_external_event_markers(int device, size_t ring_depth,
                                                              uint64_t resolution_ns) {
  return std::make_unique<ExternalEventMarkers>(device, ring_depth, resolution_ns);
}

}  // namespace accgraph::detail::cuda
