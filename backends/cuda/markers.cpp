// CUDA timestamp markers, two strategies behind the one SPI (see Note [Marker ring] in
// backend.hpp): device timestamps (1-thread %globaltimer kernels, the default) and external
// events (cudaEventRecordExternal nodes rotated per launch, the blog's mechanism).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

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
  /// Without throwing: `*err` is what CUDA returned, and get() is null unless it succeeded.
  explicit PrivateStream(cudaError_t* err) {
    *err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (*err != cudaSuccess) stream_ = nullptr;
  }
  ~PrivateStream() {
    if (stream_ == nullptr) return;
    // Note [Teardown during a capture]
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "markers: destroying a private stream");
  }
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Note [Detached markers] (opt-in: ACCGRAPH_CUDA_DETACHED_MARKERS=1): a marker recorded into a
// capture (device timestamps) becomes a side branch of the graph instead of a link of the
// stream's chain. It depends on what the stream's next operation would depend on (the
// capture's dependency set, cudaStreamGetCaptureInfo), so it starts when everything before it
// has finished, as a chained marker does; afterwards the stream's dependency set is put back
// (cudaStreamUpdateCaptureDependencies, Set), so the work after it does not wait for it.
// Measured on H100 with bench_modules (GPT-2-small-like, 2026-11-27, one gpu-check run): device
// time per replay, every module timed, 1.012x untimed detached against 1.162x chained;
// bench_torch's regions minus CUPTI's kernel spans, median -0.13 us detached against +1.12 us
// chained (separate runs).
// Why it is not the default: a detached marker is dispatched beside the work that follows it,
// not before it, so a boundary may be timed up to ~0.6 us after that work began (measured: a
// region around a 10 us delay after a fill read 9.3-9.7 us; the gap between two regions
// around a 2 ms delay read 600 ns short). Chained markers keep the guarantees the tests and
// the conformance rules check (a region contains its work; a gap is at least its delay).
// - Every detached marker also depends on the previous detached marker of its stream (kept per
//   cudaStream_t for the sequence being recorded), so a stream's markers run in order, and on
//   the last one of every other stream whose dependency set at that marker (its anchor) has
//   been joined into this stream's set since (a fork's branch joined back: the branch's end
//   precedes what the origin records after the join, as nesting requires). The sequence's tail
//   kernel (end_sequence) joins the last one of every stream, so the stamps it copies are all
//   written (CUDA allows nodes taken out of a dependency set to stay unjoined, "if they are
//   unreachable from the stream at cudaStreamEndCapture", but the tail must wait).
// - A marker runs beside the region's first kernel (a begin) or the next region's (an end), both
//   made ready by the same completion: it is launched at the greatest scheduling priority of the
//   device (cudaLaunchAttributePriority), so that where the hardware can it is dispatched before
//   that kernel's blocks fill the SMs. It does not make it dispatched first: the ~0.6 us above
//   were measured with it.
// - A marker whose stream has an empty dependency set (the first operation of a capture) stays in
//   the chain: there is nothing before it to wait for, and an empty set is not put back.
// - After a detached marker the stream's capture tail (Note [CUDA capture tail]) is what it was
//   before it, so a boundary with nothing enqueued since still shares that marker (Note
//   [Boundary sharing]), and one with work enqueued between does not.
// - Eager markers (not capturing) stay in the stream: there is no graph to branch.

/// A capturing stream's dependency set and its edge data, copied (CUDA's arrays are valid only
/// until the next call on the stream).
class CaptureDependencies {
 public:
  /// Reads `stream`'s set; false when the stream is not actively capturing.
  bool read(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* nodes = nullptr;
    const cudaGraphEdgeData* edges = nullptr;  // asked for: else programmatic edges are lossy
    size_t count = 0;
    ACCGRAPH_CUDA_CHECK(
        cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, &edges, &count),
        "record: reading the capture's dependency set");
    if (status != cudaStreamCaptureStatusActive) return false;
    nodes_.assign(nodes, nodes + count);
    edges_.clear();
    if (edges != nullptr) edges_.assign(edges, edges + count);
    return true;
  }
  const std::vector<cudaGraphNode_t>& nodes() const { return nodes_; }
  /// Whether every node of `subset` is in the set.
  bool contains_all(const std::vector<cudaGraphNode_t>& subset) const {
    for (cudaGraphNode_t node : subset)
      if (std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) return false;
    return true;
  }
  /// Makes the (non-empty) set `stream`'s dependency set again.
  void restore(cudaStream_t stream) {
    ACCGRAPH_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(
                            stream, nodes_.data(), edges_.empty() ? nullptr : edges_.data(),
                            nodes_.size(), cudaStreamSetCaptureDependencies),
                        "record: restoring the capture's dependency set after a marker");
  }

 private:
  std::vector<cudaGraphNode_t> nodes_;
  std::vector<cudaGraphEdgeData> edges_;
};

/// Adds `nodes` to `stream`'s capture dependency set.
void add_capture_dependencies(cudaStream_t stream, std::vector<cudaGraphNode_t>& nodes,
                              const char* what) {
  if (nodes.empty()) return;
  ACCGRAPH_CUDA_CHECK(
      cudaStreamUpdateCaptureDependencies(stream, nodes.data(), nullptr, nodes.size(),
                                          cudaStreamAddCaptureDependencies),
      what);
}

/// The node just captured on `stream`: its dependency set, which is that node alone.
cudaGraphNode_t last_captured_node(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  ACCGRAPH_CUDA_CHECK(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, &edges, &count),
      "record: reading the marker node just captured");
  if (status != cudaStreamCaptureStatusActive || count != 1 || nodes == nullptr)
    throw Error(ErrorCode::BackendError,
                fmt::format("record: after a marker launch the capturing stream depends on {} "
                            "nodes, not on the marker alone: report this as a bug",
                            count),
                kBackendName);
  return nodes[0];
}

/// The greatest scheduling priority of the current device (numerically the least).
int greatest_priority() {
  int least = 0, greatest = 0;
  ACCGRAPH_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                      "record: reading the device's priority range");
  return greatest;
}

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
class DeviceTimestampMarkers final : public TimestampMarkers {
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
        detached_markers_(modes.detached) {}

  ~DeviceTimestampMarkers() override { release(); }

  std::string strategy() const override { return kStrategyDeviceTimestamps; }
  size_t ring_depth() const override { return ring_; }
  uint64_t resolution_ns() const override { return resolution_ns_; }

  // Enqueues nothing: it only chooses where this sequence's markers write (Note [Device
  // timestamp ring]).
  void begin_sequence(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "begin_sequence");
    DeviceGuard guard(stream.device());
    ensure_done_flags();
    markers_in_sequence_ = 0;
    detached_.clear();
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
    CaptureDependencies before;
    if (eager_sequence_value_ != 0 || !detached_markers_ || !before.read(stream.handle()) ||
        before.nodes().empty()) {
      ACCGRAPH_CUDA_CHECK(launch_marker_record(stream.handle(), stamp, programmatic_), "record");
      return;
    }
    record_detached(stream.handle(), stamp, before);
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
      join_detached(stream.handle());
    }
    ACCGRAPH_CUDA_CHECK(
        launch_marker_end(stream.handle(), counter, eager_sequence_value_, chunks, stamps.device,
                          done_.device, static_cast<uint32_t>(ring_),
                          static_cast<uint32_t>(stamps.stride), static_cast<uint32_t>(count)),
        "end_sequence");
    in_sequence_ = false;
    current_chunks_ = nullptr;
    detached_.clear();
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
    // One copy (not a volatile load per marker: issue 21 (v2-1), 1000 markers per report):
    // is_complete() saw the sequence's done flag, which the device writes after its stamps,
    // and fenced (acquire) before returning, so the stamps are read after the flag.
    std::memcpy(times, stamps.host + (sequence % ring_) * stamps.stride, count * sizeof(uint64_t));
  }

 private:
  volatile uint64_t* done_host() const { return done_.host; }

  // Note [Detached markers]: the marker as a side branch of the capture, after the stream's
  // previous detached marker; the stream's dependency set (`before`) is put back.
  void record_detached(cudaStream_t stream, uint64_t* stamp, CaptureDependencies& before) {
    // The markers this one follows: its stream's previous one, and that of every other stream
    // joined into this one since (the set it was recorded at is part of this stream's set).
    std::vector<cudaGraphNode_t> after;
    for (const DetachedMarker& m : detached_)
      if (m.stream == stream || before.contains_all(m.anchor)) after.push_back(m.node);
    add_capture_dependencies(stream, after, "record: ordering a marker after the earlier ones");
    if (!priority_) priority_ = greatest_priority();
    ACCGRAPH_CUDA_CHECK(launch_marker_record(stream, stamp, programmatic_, &*priority_), "record");
    const cudaGraphNode_t node = last_captured_node(stream);
    before.restore(stream);
    auto own = std::find_if(detached_.begin(), detached_.end(),
                            [&](const DetachedMarker& m) { return m.stream == stream; });
    if (own != detached_.end()) {
      own->node = node;
      own->anchor = before.nodes();
    } else {
      detached_.push_back(DetachedMarker{stream, node, before.nodes()});
    }
  }

  // Before a captured tail: it waits for the last detached marker of every stream.
  void join_detached(cudaStream_t stream) {
    std::vector<cudaGraphNode_t> last;
    last.reserve(detached_.size());
    for (const DetachedMarker& m : detached_) last.push_back(m.node);
    add_capture_dependencies(stream, last, "end_sequence: joining the markers");
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
  bool detached_markers_;                // Note [Detached markers]
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
  // The captured sequence's last detached marker per stream (Note [Detached markers]).
  struct DetachedMarker {
    cudaStream_t stream;
    cudaGraphNode_t node;
    std::vector<cudaGraphNode_t> anchor;  // the stream's dependency set it was recorded at
  };
  std::vector<DetachedMarker> detached_;
  std::optional<int> priority_;  // the device's greatest scheduling priority, once read
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
  // Nothing is created here: the events, the reference pair and its pinned word come with the
  // first sequence (a set that never records costs nothing: issue 20), the marker events as
  // record() reaches them.
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

std::unique_ptr<TimestampMarkers> make_device_timestamp_markers(int device, size_t ring_depth,
                                                                uint64_t resolution_ns,
                                                                DeviceMarkerModes modes,
                                                                const MarkerOptions& sizing) {
  return std::make_unique<DeviceTimestampMarkers>(device, ring_depth, resolution_ns, modes, sizing);
}

std::unique_ptr<TimestampMarkers> make_external_event_markers(int device, size_t ring_depth,
                                                              uint64_t resolution_ns) {
  return std::make_unique<ExternalEventMarkers>(device, ring_depth, resolution_ns);
}

}  // namespace accgraph::detail::cuda
