// CUDA timestamp markers, two strategies behind the one SPI (see Note [Marker ring] in
// backend.hpp): device timestamps (1-thread %globaltimer kernels, the default) and external
// events (cudaEventRecordExternal nodes rotated per launch, the blog's mechanism).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

[[noreturn]] void throw_too_many_markers(uint32_t marker) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("record: marker {} is beyond the {} markers a cuda sequence can hold: "
                          "time fewer regions per graph",
                          marker, kMarkerCapacity),
              kBackendName);
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ACCGRAPH_CUDA_CHECK(cudaStreamIsCapturing(stream, &status), "markers: reading the capture state");
  return status == cudaStreamCaptureStatusActive;
}

/// A private non-blocking stream for the markers' own set-up work (never a user's stream, so the
/// set-up neither joins nor waits on a capture).
class PrivateStream {
 public:
  PrivateStream() {
    ACCGRAPH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                        "markers: creating a private stream");
  }
  ~PrivateStream() {
    ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "markers: destroying a private stream");
  }
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// --- device timestamps -----------------------------------------------------------------------

// See Note [Device timestamp ring] in kernels.cu. Device memory: the replay counter, and staging
// areas of kMarkerCapacity stamps: one per ring slot for eager sequences, then one per capture.
// Pinned, host-mapped block: stamps[ring][kMarkerCapacity] (filled by the tail kernels), then
// done[ring] (the published sequence number + 1).
class DeviceTimestampMarkers final : public TimestampMarkers {
 public:
  DeviceTimestampMarkers(int device, size_t ring, uint64_t resolution_ns, bool programmatic)
      : device_(device), ring_(ring), resolution_ns_(resolution_ns), programmatic_(programmatic) {
    RelaxedCaptureModeGuard relaxed;
    size_t bytes = (ring_ * kMarkerCapacity + ring_) * sizeof(uint64_t);
    ACCGRAPH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes,
                                      cudaHostAllocMapped | cudaHostAllocPortable),
                        "device_timestamps markers: allocating the pinned ring");
    std::memset(host_, 0, bytes);
    try {
      ACCGRAPH_CUDA_CHECK(
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_ptr_), host_, 0),
          "device_timestamps markers: mapping the ring");
      // The counter and the staging areas are device memory: marker kernels never touch PCIe.
      // The first capture's staging area comes with the eager ones (one allocation).
      ACCGRAPH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counter_), sizeof(uint64_t)),
                          "device_timestamps markers: allocating the replay counter");
      ACCGRAPH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&staging_),
                                     (ring_ + 1) * kMarkerCapacity * sizeof(uint64_t)),
                          "device_timestamps markers: allocating the staging areas");
      PrivateStream setup;
      ACCGRAPH_CUDA_CHECK(cudaMemsetAsync(counter_, 0, sizeof(uint64_t), setup.get()),
                          "device_timestamps markers: clearing the replay counter");
      ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(setup.get()),
                          "device_timestamps markers: clearing the replay counter");
    } catch (...) {
      release();
      throw;
    }
  }

  ~DeviceTimestampMarkers() override { release(); }

  std::string strategy() const override { return kStrategyDeviceTimestamps; }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return resolution_ns_; }

  // Enqueues nothing: it only chooses where this sequence's markers write (Note [Device
  // timestamp ring]).
  void begin_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "begin_sequence");
    DeviceGuard guard(stream.device());
    markers_in_sequence_ = 0;
    if (stream_is_capturing(stream.handle())) {
      // Its replays are numbered by the device counter (fixed 0); a staging area of its own,
      // since another capture on this marker set may be replayed concurrently.
      eager_sequence_value_ = 0;
      if (captures_ == 0) {
        current_staging_ = staging_ + ring_ * kMarkerCapacity;
      } else {
        RelaxedCaptureModeGuard relaxed;
        uint64_t* staging = nullptr;
        ACCGRAPH_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&staging), kMarkerCapacity * sizeof(uint64_t)),
            "begin_sequence: allocating a capture's staging area");
        extra_staging_.push_back(staging);
        current_staging_ = staging;
      }
      ++captures_;
    } else {
      // An eager sequence runs now, numbered by the host; concurrent eager sequences (other
      // streams) each write the staging area of their own ring slot.
      eager_sequence_value_ = launched_ + 1;
      current_staging_ = staging_ + (launched_ % ring_) * kMarkerCapacity;
      ++launched_;
    }
  }

  void record(StreamImpl& stream_impl, uint32_t marker) override {
    if (marker >= kMarkerCapacity) throw_too_many_markers(marker);
    if (current_staging_ == nullptr)
      throw Error(ErrorCode::InvalidState,
                  "record: no marker sequence was begun: call begin_sequence first", kBackendName);
    CudaStream& stream = as_cuda_stream(stream_impl, "record");
    DeviceGuard guard(stream.device());
    markers_in_sequence_ = std::max<size_t>(markers_in_sequence_, size_t{marker} + 1);
    ACCGRAPH_CUDA_CHECK(
        launch_marker_record(stream.handle(), current_staging_ + marker, programmatic_), "record");
  }

  void end_sequence(StreamImpl& stream_impl) override {
    if (current_staging_ == nullptr)
      throw Error(ErrorCode::InvalidState,
                  "end_sequence: no marker sequence was begun: call begin_sequence first",
                  kBackendName);
    CudaStream& stream = as_cuda_stream(stream_impl, "end_sequence");
    DeviceGuard guard(stream.device());
    ACCGRAPH_CUDA_CHECK(
        launch_marker_end(stream.handle(), counter_, eager_sequence_value_, current_staging_,
                          stamps_device(), done_device(), static_cast<uint32_t>(ring_),
                          static_cast<uint32_t>(kMarkerCapacity),
                          static_cast<uint32_t>(markers_in_sequence_)),
        "end_sequence");
    current_staging_ = nullptr;
  }

  void before_launch(GraphImplInterface&, StreamImpl& stream_impl, uint64_t sequence) override {
    // Normally the device counter already equals `sequence` (replays run in launch order): no
    // host work. When it does not (numbering restarted, eager sequences in between, which do
    // not advance it), re-align it in stream order first.
    if (sequence != device_counter_) {
      CudaStream& stream = as_cuda_stream(stream_impl, "before_launch");
      DeviceGuard guard(stream.device());
      if (sequence < launched_) {
        for (size_t i = 0; i < ring_; ++i) done_host()[i] = 0;  // older flags must not match
      }
      ACCGRAPH_CUDA_CHECK(launch_set_counter(stream.handle(), counter_, sequence),
                          "before_launch: aligning the replay counter");
    }
    launched_ = sequence + 1;
    device_counter_ = sequence + 1;
  }

  bool is_complete(uint64_t sequence) override {
    bool done = done_host()[sequence % ring_] >= sequence + 1;
    if (done) std::atomic_thread_fence(std::memory_order_acquire);
    return done;
  }

  void wait(uint64_t sequence) override {
    // A poll of pinned memory: no CUDA call, no stream to know. Spin briefly (reports are often
    // due within microseconds), then sleep in short steps.
    for (int spin = 0; !is_complete(sequence); ++spin) {
      if (spin < 4096) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        if (spin % 4096 == 0) {
          cudaError_t err = cudaPeekAtLastError();
          if (err != cudaSuccess && err != cudaErrorNotReady)
            throw_cuda_error(err, "cudaPeekAtLastError",
                             fmt::format("waiting for marker sequence {}", sequence));
        }
      }
    }
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (count > kMarkerCapacity)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("read: {} markers asked for but a sequence holds at most {}", count,
                              kMarkerCapacity),
                  kBackendName);
    if (!is_complete(sequence))
      throw Error(
          ErrorCode::InvalidState,
          fmt::format("read: marker sequence {} has not finished: wait() for it first", sequence),
          kBackendName);
    const volatile uint64_t* slot = host_ + (sequence % ring_) * kMarkerCapacity;
    for (size_t i = 0; i < count; ++i) times[i] = slot[i];
  }

 private:
  uint64_t* stamps_device() const { return device_ptr_; }
  uint64_t* done_device() const { return device_ptr_ + ring_ * kMarkerCapacity; }
  volatile uint64_t* done_host() const { return host_ + ring_ * kMarkerCapacity; }

  void release() noexcept {
    if (counter_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaFree(counter_), "device_timestamps markers: freeing the counter");
    if (staging_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaFree(staging_), "device_timestamps markers: freeing the staging areas");
    for (uint64_t* staging : extra_staging_)
      ACCGRAPH_CUDA_LOG(cudaFree(staging), "device_timestamps markers: freeing a staging area");
    extra_staging_.clear();
    if (host_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaFreeHost(host_), "device_timestamps markers: freeing the ring");
    counter_ = nullptr;
    staging_ = nullptr;
    host_ = nullptr;
  }

  int device_;
  size_t ring_;
  uint64_t resolution_ns_;
  bool programmatic_;                     // Note [Programmatic markers] in kernels.cu
  uint64_t* host_ = nullptr;              // pinned, host-mapped ring
  uint64_t* device_ptr_ = nullptr;        // the same memory as the device sees it
  uint64_t* counter_ = nullptr;           // device-side count of captured sequences finished
  uint64_t* staging_ = nullptr;           // device: ring_ eager staging areas + the first capture's
  std::vector<uint64_t*> extra_staging_;  // device: staging areas of later captures
  size_t captures_ = 0;                   // captured sequences begun on this set
  uint64_t* current_staging_ = nullptr;   // where the sequence being recorded writes
  uint64_t eager_sequence_value_ = 0;     // its number + 1 (eager), or 0: the device counts
  size_t markers_in_sequence_ = 0;  // markers recorded since begin_sequence (copied by the tail)
  uint64_t launched_ = 0;           // the host's count of sequences begun
  uint64_t device_counter_ = 0;     // what the device counter will hold before the next launch
};

// --- external events -------------------------------------------------------------------------

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
  ExternalEventMarkers(int device, size_t ring, uint64_t resolution_ns)
      : device_(device), ring_(ring), resolution_ns_(resolution_ns), events_(ring), end_(ring) {
    RelaxedCaptureModeGuard relaxed;
    try {
      for (cudaEvent_t& e : end_)
        ACCGRAPH_CUDA_CHECK(cudaEventCreate(&e), "external_events markers: creating events");
      ACCGRAPH_CUDA_CHECK(cudaEventCreate(&ref_before_),
                          "external_events markers: creating events");
      ACCGRAPH_CUDA_CHECK(cudaEventCreate(&ref_after_), "external_events markers: creating events");
      ACCGRAPH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ref_host_), sizeof(uint64_t),
                                        cudaHostAllocMapped | cudaHostAllocPortable),
                          "external_events markers: allocating the reference");
      anchor();
    } catch (...) {
      release();
      throw;
    }
  }

  ~ExternalEventMarkers() override { release(); }

  std::string strategy() const override { return kStrategyExternalEvents; }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return resolution_ns_; }

  void begin_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "begin_sequence");
    DeviceGuard guard(stream.device());
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

std::unique_ptr<TimestampMarkers> make_device_timestamp_markers(int device, size_t ring_depth,
                                                                uint64_t resolution_ns,
                                                                bool programmatic) {
  return std::make_unique<DeviceTimestampMarkers>(device, ring_depth, resolution_ns, programmatic);
}

std::unique_ptr<TimestampMarkers> make_external_event_markers(int device, size_t ring_depth,
                                                              uint64_t resolution_ns) {
  return std::make_unique<ExternalEventMarkers>(device, ring_depth, resolution_ns);
}

}  // namespace accgraph::detail::cuda
