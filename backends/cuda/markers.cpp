// CUDA timestamp markers, the device timestamps strategy (the default): 1-thread %globaltimer
// kernels, placed exactly in captured graphs (Note [Exact marker placement] in
// capture_helpers.cpp). The external events strategy is in external_events.cpp; both sit behind
// the one SPI (Note [Marker ring] in backend.hpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
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

// --- device timestamps -----------------------------------------------------------------------

/// Device memory of `stamps` stamps on the current device, allocated even inside a capture.
uint64_t* allocate_staging(size_t stamps, const char* what) {
  RelaxedCaptureModeGuard relaxed;  // a capture in global mode refuses cudaMalloc otherwise
  uint64_t* p = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), stamps * sizeof(uint64_t)), what);
  return p;
}

/// Pinned, host-mapped memory of `words` zeroed words, and its device address.
struct PinnedWords {
  uint64_t* host = nullptr;
  uint64_t* device = nullptr;
  size_t stride = 0;  // as a stamp ring: stamps per slot

  static PinnedWords allocate(size_t words, const char* what) {
    RelaxedCaptureModeGuard relaxed;
    PinnedWords block;
    ACCGRAPH_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&block.host), words * sizeof(uint64_t),
                      cudaHostAllocMapped | cudaHostAllocPortable),
        what);
    std::memset(block.host, 0, words * sizeof(uint64_t));
    cudaError_t err =
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&block.device), block.host, 0);
    if (err != cudaSuccess) {
      ACCGRAPH_CUDA_LOG(cudaFreeHost(block.host), what);
      throw_cuda_error(err, "cudaHostGetDevicePointer", what);
    }
    return block;
  }
};

// See Note [Device timestamp ring] in kernels.cu: nothing is allocated here; the storage grows
// with the markers the sequences record.
class DeviceTimestampMarkers final : public TimestampMarkers, public MarkerKernelNames {
 public:
  // `sizing`: create_markers' options; with a memory budget (and no explicit depth) the first
  // captured sequence sizes the ring (ensure_ring).
  DeviceTimestampMarkers(int device, size_t ring, uint64_t resolution_ns, DeviceMarkerModes modes,
                         const MarkerOptions& sizing)
      : device_(device),
        ring_(ring),
        memory_budget_(sizing.ring_depth == 0 ? sizing.memory_budget : 0),
        resolution_ns_(resolution_ns),
        programmatic_(modes.programmatic),
        exact_(modes.exact),
        launch_completion_after_(modes.launch_completion_after) {}

  ~DeviceTimestampMarkers() override { release(); }

  std::string strategy() const override { return kStrategyDeviceTimestamps; }
  timing::MarkerKernels marker_kernels() const override {
    return device_timestamp_marker_kernels();
  }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return resolution_ns_; }

  // Enqueues nothing: it only chooses where this sequence's markers write (Note [Device
  // timestamp ring]).
  void begin_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "begin_sequence");
    DeviceGuard guard(stream.device());
    ensure_done_flags();
    markers_in_sequence_ = 0;
    placed_.clear();
    if (stream_is_capturing(stream.handle())) {
      // Its replays are numbered by the device counter (fixed 0); chunks of its own, since
      // another capture on this marker set may be replayed concurrently.
      eager_sequence_value_ = 0;
      captures_.emplace_back();
      current_chunks_ = &captures_.back();
    } else {
      // An eager sequence runs now, numbered by the host; concurrent eager sequences (other
      // streams) each write the part of the eager chunks of their own ring slot.
      eager_sequence_value_ = launched_ + 1;
      current_chunks_ = &eager_chunks_;
      ++launched_;
    }
    in_sequence_ = true;
  }

  void record(StreamImpl& stream_impl, uint32_t marker) override {
    if (marker >= kMarkerCapacity) throw_too_many_markers(marker);
    if (!in_sequence_)
      throw Error(ErrorCode::InvalidState,
                  "record: no marker sequence was begun: call begin_sequence first", kBackendName);
    CudaStream& stream = as_cuda_stream(stream_impl, "record");
    DeviceGuard guard(stream.device());
    markers_in_sequence_ = std::max<size_t>(markers_in_sequence_, size_t{marker} + 1);
    uint64_t* stamp = stamp_address(marker);
    if (eager_sequence_value_ == 0 && exact_) {  // Note [Exact marker placement]
      ACCGRAPH_CUDA_CHECK(launch_marker_record(stream.handle(), stamp, MarkerLaunch::Placed),
                          "record");
      placed_.push_back(CapturedMarker{last_captured_node(stream.handle()), stream.handle()});
      return;
    }
    const MarkerLaunch how = programmatic_ ? MarkerLaunch::Programmatic : MarkerLaunch::Plain;
    ACCGRAPH_CUDA_CHECK(launch_marker_record(stream.handle(), stamp, how), "record");
  }

  void end_sequence(StreamImpl& stream_impl) override {
    if (!in_sequence_)
      throw Error(ErrorCode::InvalidState,
                  "end_sequence: no marker sequence was begun: call begin_sequence first",
                  kBackendName);
    CudaStream& stream = as_cuda_stream(stream_impl, "end_sequence");
    DeviceGuard guard(stream.device());
    const size_t count = markers_in_sequence_;
    const uint32_t ring_index = ensure_ring(count);
    const PinnedWords& stamps = rings_[ring_index];
    StagingChunks chunks;
    const bool eager = eager_sequence_value_ != 0;
    const size_t slot_offset = eager ? ((eager_sequence_value_ - 1) % ring_) * kStagingChunk : 0;
    for (size_t c = 0; c * kStagingChunk < count; ++c)
      chunks.chunk[c] = (*current_chunks_)[c] + slot_offset;
    uint64_t* counter = nullptr;
    if (eager) {
      slot_ring_[(eager_sequence_value_ - 1) % ring_] = ring_index;
    } else {
      counter = ensure_counter();
      capture_ring_ = ring_index;
      place_markers(stream.handle());
    }
    ACCGRAPH_CUDA_CHECK(
        launch_marker_end(stream.handle(), counter, eager_sequence_value_, chunks, stamps.device,
                          done_.device, static_cast<uint32_t>(ring_),
                          static_cast<uint32_t>(stamps.stride), static_cast<uint32_t>(count)),
        "end_sequence");
    in_sequence_ = false;
    current_chunks_ = nullptr;
    placed_.clear();
  }

  void before_launch(GraphImplInterface&, StreamImpl& stream_impl, uint64_t sequence) override {
    if (counter_ == nullptr) {  // no captured sequence: the graph holds no marker to number
      launched_ = sequence + 1;
      return;
    }
    // Normally the device counter already equals `sequence` (replays run in launch order): no
    // host work. When it does not (numbering restarted, eager sequences in between, which do
    // not advance it, a new counter, a trusted foreign launch that raised), re-align it in
    // stream order first.
    if (sequence != device_counter_) {
      CudaStream& stream = as_cuda_stream(stream_impl, "before_launch");
      DeviceGuard guard(stream.device());
      // Numbered again from `sequence`: the flags of the sequences begun from there on must not
      // match the new launches. Only theirs: an older sequence may be a replay not collected
      // yet, whose flag is its report. A trusted foreign launch whose owner raised (PyTorch's
      // replay refusing a capturing stream) gives its number to the next launch, and clearing
      // every flag then made flush() wait forever for the replays launched before it.
      for (uint64_t q = sequence; q < launched_ && q - sequence < ring_; ++q)
        done_host()[q % ring_] = 0;
      ACCGRAPH_CUDA_CHECK(launch_set_counter(stream.handle(), counter_, sequence),
                          "before_launch: aligning the replay counter");
    }
    slot_ring_[sequence % ring_] = capture_ring_;
    launched_ = sequence + 1;
    device_counter_ = sequence + 1;
  }

  bool is_complete(uint64_t sequence) override {
    if (done_.host == nullptr) return false;  // no sequence has begun
    bool done = done_host()[sequence % ring_] >= sequence + 1;
    if (done) std::atomic_thread_fence(std::memory_order_acquire);
    return done;
  }

  void wait(uint64_t sequence) override {
    if (done_.host == nullptr)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("wait: marker sequence {} was never begun on this marker set: wait "
                              "only for sequences that were launched",
                              sequence),
                  kBackendName);
    // A poll of pinned memory: no CUDA call, no stream to know. Spin briefly (reports are often
    // due within microseconds), then sleep in short steps.
    for (int spin = 0; !is_complete(sequence); ++spin) {
      if (spin < 4096) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        if (spin % 4096 == 0) check_context(sequence);
      }
    }
  }

  // Note [Broken context]: once the context is broken (a sticky error, such as an illegal
  // address in anyone's kernel) no sequence completes, and a wait would poll forever: flush()
  // and a Python program's exit hung (seen on the H100 after a replay read a freed tensor).
  // cudaPeekAtLastError sees only this thread's last failed call, which whoever saw the error
  // may have cleared (PyTorch does), so a query of a private stream asks the context itself: it
  // returns the sticky error (so does the stream's creation, when the context broke before the
  // first check). About every 80 ms of waiting. Checked on the H100 by the test
  // cuda_broken_context: flush() raises at once, and the process ends.
  void check_context(uint64_t sequence) {
    cudaError_t err = cudaPeekAtLastError();
    const char* call = "cudaPeekAtLastError";
    if (err == cudaSuccess || err == cudaErrorNotReady) {
      DeviceGuard guard(device_);
      // Another thread may be capturing in global mode, which refuses (and is broken by) a
      // query or a stream creation on a thread in that mode; a query of our own idle stream
      // cannot change what it captures.
      RelaxedCaptureModeGuard relaxed;
      if (!context_probe_) {
        auto probe = std::make_unique<PrivateStream>(&err);
        call = "cudaStreamCreateWithFlags";
        if (err == cudaSuccess) context_probe_ = std::move(probe);
      }
      if (context_probe_) {
        err = cudaStreamQuery(context_probe_->get());
        call = "cudaStreamQuery";
      }
    }
    if (err != cudaSuccess && err != cudaErrorNotReady)
      throw_cuda_error(err, call,
                       fmt::format("waiting for marker sequence {}: CUDA reports a failure, so "
                                   "the sequence may never complete and its report is lost (after "
                                   "a sticky error such as an illegal address the process must "
                                   "restart to use the device)",
                                   sequence));
  }

  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (!is_complete(sequence))
      throw Error(
          ErrorCode::InvalidState,
          fmt::format("read: marker sequence {} has not finished: wait() for it first", sequence),
          kBackendName);
    const PinnedWords& stamps = rings_[slot_ring_[sequence % ring_]];
    if (count > stamps.stride)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("read: {} markers asked for but sequence {} has room for {}: read "
                              "at most the markers its sequence recorded",
                              count, sequence, stamps.stride),
                  kBackendName);
    // One copy, not a volatile load per marker (a report reads up to 1000 markers: bench/README.md,
    // 'Targets and figures the code cites'): is_complete() saw the sequence's done flag, which the
    // device writes after its stamps, and fenced (acquire) before returning, so the stamps are read
    // after the flag.
    std::memcpy(times, stamps.host + (sequence % ring_) * stamps.stride, count * sizeof(uint64_t));
  }

 private:
  volatile uint64_t* done_host() const { return done_.host; }

  // Note [Exact marker placement]: before a captured tail, the sequence's markers move off the
  // critical path, and the tail joins the last marker of every stream.
  void place_markers(cudaStream_t stream) {
    if (placed_.empty()) return;
    CaptureState capture = capture_state(stream, "end_sequence: reading the capture");
    if (!capture.active)
      throw Error(ErrorCode::InvalidState,
                  "end_sequence: the sequence's markers were captured but its stream no longer "
                  "captures: end the sequence before the capture",
                  kBackendName);
    std::vector<cudaGraphNode_t> join;
    PlacementCounts counts;
    const std::vector<cudaGraphNode_t> lasts =
        place_markers_exactly(capture.graph, placed_, launch_completion_after_, counts);
    // A diagnostic of where the boundaries' cost goes (ACCGRAPH_CUDA_PLACEMENT_REPORT=1 prints
    // it as a warning, so the default log handler shows it).
    static const bool report = std::getenv("ACCGRAPH_CUDA_PLACEMENT_REPORT") != nullptr;
    log(report ? LogLevel::Warning : LogLevel::Debug,
        fmt::format("cuda: placed {} markers: after a kernel {} (launch completion), after a PDL "
                    "kernel {}, after another node {}; before a kernel {} (launch completion), "
                    "before a PDL kernel {} (no edge), before another node {} (chained); {} "
                    "edges refused",
                    placed_.size(), counts.after_kernel, counts.after_programmatic,
                    counts.after_other, counts.before_kernel, counts.before_programmatic,
                    counts.before_other, counts.refused));
    for (cudaGraphNode_t last : lasts)
      if (std::find(capture.dependencies.begin(), capture.dependencies.end(), last) ==
          capture.dependencies.end())
        join.push_back(last);
    if (join.empty()) return;
    ACCGRAPH_CUDA_CHECK(
        cudaStreamUpdateCaptureDependencies(stream, join.data(), nullptr, join.size(),
                                            cudaStreamAddCaptureDependencies),
        "end_sequence: joining the markers");
  }

  // Where marker `marker` of the current sequence writes; allocates the chunks up to it.
  uint64_t* stamp_address(uint32_t marker) {
    std::vector<uint64_t*>& chunks = *current_chunks_;
    const bool eager = eager_sequence_value_ != 0;
    while (chunks.size() <= marker / kStagingChunk) {
      // An eager chunk holds kStagingChunk stamps per ring slot (Note [Device timestamp ring]).
      chunks.reserve(chunks.size() + 1);  // push_back below cannot throw and leak the chunk
      chunks.push_back(allocate_staging(eager ? ring_ * kStagingChunk : kStagingChunk,
                                        "record: allocating marker staging memory"));
    }
    const size_t slot_offset = eager ? ((eager_sequence_value_ - 1) % ring_) * kStagingChunk : 0;
    return chunks[marker / kStagingChunk] + slot_offset + marker % kStagingChunk;
  }

  // The done flags (pinned, one per ring slot) and the per-slot ring index, at the first
  // sequence.
  void ensure_done_flags() {
    if (done_.host != nullptr) return;
    // Room for the deepest ring the budget may give (ensure_ring), so sizing never reallocates.
    done_ = PinnedWords::allocate(memory_budget_ != 0 ? kMaxRingDepth : ring_,
                                  "begin_sequence: allocating the marker done flags");
    slot_ring_.assign(ring_, 0);
  }

  // The index in rings_ of a pinned ring with room for `count` stamps per slot: the current one,
  // or a new one (the stride doubles, so a growing set reallocates rarely).
  uint32_t ensure_ring(size_t count) {
    size_by_budget(count);
    if (!rings_.empty() && rings_.back().stride >= count)
      return static_cast<uint32_t>(rings_.size() - 1);
    const size_t stride = rings_.empty() ? count : std::max(count, 2 * rings_.back().stride);
    PinnedWords ring;
    if (stride > 0)
      ring = PinnedWords::allocate(ring_ * stride, "end_sequence: allocating the pinned ring");
    ring.stride = stride;
    rings_.push_back(ring);
    return static_cast<uint32_t>(rings_.size() - 1);
  }

  // marker.budget (Note [Marker budget] in backend.hpp): the first sequence, when captured and
  // nothing ran on this set yet, sizes the ring to the budget: per slot its stamps (pinned) and
  // a done flag. Called at its end_sequence, before anything uses ring_ for it.
  void size_by_budget(size_t count) {
    if (memory_budget_ == 0 || !rings_.empty() || eager_sequence_value_ != 0 || launched_ != 0 ||
        counter_ != nullptr || !eager_chunks_.empty())
      return;
    MarkerOptions sizing;
    sizing.memory_budget = memory_budget_;
    ring_ = sizing.budget_depth((count + 1) * sizeof(uint64_t), ring_, kMaxRingDepth);
    slot_ring_.assign(ring_, 0);  // the done flags have room for kMaxRingDepth
  }

  // The device replay counter, at the first captured tail. Its contents are unknown: the first
  // launch re-aligns it (device_counter_ matches no sequence number).
  uint64_t* ensure_counter() {
    if (counter_ == nullptr) {
      counter_ = allocate_staging(1, "end_sequence: allocating the replay counter");
      device_counter_ = ~uint64_t{0};
    }
    return counter_;
  }

  void release() noexcept {
    // Note [Teardown during a capture]
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    if (counter_ != nullptr)
      ACCGRAPH_CUDA_LOG(cudaFree(counter_), "device_timestamps markers: freeing the counter");
    counter_ = nullptr;
    auto free_chunks = [](std::vector<uint64_t*>& chunks) {
      for (uint64_t* chunk : chunks)
        if (chunk != nullptr)
          ACCGRAPH_CUDA_LOG(cudaFree(chunk), "device_timestamps markers: freeing staging memory");
      chunks.clear();
    };
    free_chunks(eager_chunks_);
    for (std::vector<uint64_t*>& chunks : captures_) free_chunks(chunks);
    captures_.clear();
    for (PinnedWords& ring : rings_)
      if (ring.host != nullptr)
        ACCGRAPH_CUDA_LOG(cudaFreeHost(ring.host), "device_timestamps markers: freeing a ring");
    rings_.clear();
    if (done_.host != nullptr)
      ACCGRAPH_CUDA_LOG(cudaFreeHost(done_.host), "device_timestamps markers: freeing the flags");
    done_ = PinnedWords{};
  }

  int device_;
  // Note [Broken context]: a private idle stream whose query reports a broken context; made
  // the first time a wait checks.
  std::unique_ptr<PrivateStream> context_probe_;

  size_t ring_;           // final once a sequence ran (size_by_budget)
  size_t memory_budget_;  // bytes the ring may be sized to; 0: ring_ is fixed
  uint64_t resolution_ns_;
  bool programmatic_;                    // Note [Programmatic markers] in kernels.cu
  bool exact_;                           // Note [Exact marker placement]
  bool launch_completion_after_;         // DeviceMarkerModes::launch_completion_after
  PinnedWords done_;                     // done[ring]: the published sequence number + 1
  std::vector<PinnedWords> rings_;       // pinned stamp rings [ring][stride]; back() is the current
  std::vector<uint32_t> slot_ring_;      // per ring slot: the ring its latest sequence writes
  uint32_t capture_ring_ = 0;            // the ring the latest capture's tail writes
  uint64_t* counter_ = nullptr;          // device-side count of captured sequences finished
  std::vector<uint64_t*> eager_chunks_;  // device: ring x kStagingChunk stamps each
  std::deque<std::vector<uint64_t*>> captures_;       // device: each capture's chunks (stable)
  std::vector<uint64_t*>* current_chunks_ = nullptr;  // the sequence being recorded's chunks
  bool in_sequence_ = false;
  uint64_t eager_sequence_value_ = 0;  // its number + 1 (eager), or 0: the device counts
  size_t markers_in_sequence_ = 0;     // markers recorded since begin_sequence (copied by the tail)
  uint64_t launched_ = 0;              // the host's count of sequences begun
  uint64_t device_counter_ = 0;        // what the device counter will hold before the next launch
  // The captured sequence's markers, in record order (Note [Exact marker placement]).
  std::vector<CapturedMarker> placed_;
};

}  // namespace

std::unique_ptr<TimestampMarkers> make_device_timestamp_markers(int device, size_t ring_depth,
                                                                uint64_t resolution_ns,
                                                                DeviceMarkerModes modes,
                                                                const MarkerOptions& sizing) {
  return std::make_unique<DeviceTimestampMarkers>(device, ring_depth, resolution_ns, modes, sizing);
}

}  // namespace accgraph::detail::cuda
