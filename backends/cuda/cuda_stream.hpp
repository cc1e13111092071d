// Internal: the CUDA backend's streams (stream.cpp) and the sinks that carry the failures of
// their enqueued host functions (Note [CUDA failures]).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <cuda_runtime_api.h>

#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/spi/first_failure.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "cuda_backend.hpp"

namespace accgraph::detail::cuda {

// --- failures of enqueued work ---------------------------------------------------------------

/// Note [CUDA failures]: Note [Failures] in accgraph/spi/backend.hpp on CUDA. A host function
/// (cudaLaunchHostFunc) cannot throw into CUDA, so each one catches what its callable throws and
/// records it in a sink:
/// - an eager host_call records in its stream's sink, which synchronize() throws from and the
///   stream's destructor logs (after waiting for the host calls still pending on it);
/// - a host_call captured into a graph records in the sink of the capture, found through the
///   cudaGraph_t being built (capture_sink); each replay of a graph with such nodes then
///   enqueues one more host function on the replay stream that moves the replay's failure to
///   that stream's sink. The next launch of the graph waits for that move (an event), so a failure
///   of replay k is never reported on the stream of replay k+1.
/// A host_call on a stream captured by someone else (not through accgraph) has no sink: its
/// failure is logged as an Error when it happens.
struct FailureSink {
  FirstFailure failures;
  std::atomic<uint64_t> pending{0};         ///< a stream's eager host functions not yet run
  std::atomic<bool> has_host_nodes{false};  ///< a capture's: a host node records here
};

/// The sink of the accgraph capture building `graph`, or nullptr.
std::shared_ptr<FailureSink> capture_sink(cudaGraph_t graph);
void register_capture_sink(cudaGraph_t graph, std::shared_ptr<FailureSink> sink);
void unregister_capture_sink(cudaGraph_t graph) noexcept;

// --- streams ---------------------------------------------------------------------------------

/// Also a CaptureTail (Note [CUDA capture tail] in stream.cpp), owned and wrapped streams alike.
class CudaStream final : public StreamImpl, public CaptureTail, public CapturedWork {
 public:
  /// Owned: destroyed with this object; Borrowed: a wrapped handle, its creator's to destroy.
  CudaStream(int device, cudaStream_t stream, Ownership ownership);
  ~CudaStream() override;

  int device() const override { return device_; }
  void* native_handle() const override { return static_cast<void*>(stream_); }
  cudaStream_t handle() const noexcept { return stream_; }
  /// The legacy default stream (a wrapped nullptr or cudaStreamLegacy) cannot be captured.
  bool is_legacy_default() const noexcept;

  void copy(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, uint8_t value, size_t bytes) override;
  void host_call(std::function<void()> fn) override;
  void delay(std::chrono::nanoseconds duration) override;
  void wait_for(StreamImpl& other) override;
  void synchronize() override;
  bool is_capturing() const override;
  uint64_t capture_tail() const noexcept override;
  /// Note [Untimed foreign replays] (spi/untimed_replay.hpp), in untimed.cpp.
  std::unique_ptr<CaptureCopy> copy_capture() override;

  /// Note [Capture check on replay]: a snapshot whose bit 0 is clear only when the stream
  /// cannot be capturing now (the rest counts note_capture() calls).
  uint64_t capture_hint() const noexcept { return capture_hint_.load(std::memory_order_acquire); }
  /// A capture may now include this stream (capture_begin on it, or a fork into it).
  void note_capture() noexcept {
    uint64_t seen = capture_hint_.load(std::memory_order_relaxed);
    while (
        !capture_hint_.compare_exchange_weak(seen, ((seen | 1) + 2), std::memory_order_acq_rel)) {
    }
  }
  /// is_capturing() said no after capture_hint() returned `seen`: an owned stream needs no
  /// check until note_capture() again (unless one came in between, which keeps the bit).
  void note_not_capturing(uint64_t seen) noexcept {
    if (ownership_ == Ownership::Owned)
      capture_hint_.compare_exchange_strong(seen, seen & ~uint64_t{1}, std::memory_order_acq_rel);
  }

 private:
  cudaEvent_t order_event();

  int device_;
  cudaStream_t stream_;
  Ownership ownership_;
  cudaEvent_t order_event_ = nullptr;  // recorded here when another stream waits for this one
  // Note [Capture check on replay]: an owned stream enters a capture only through accgraph
  // (capture_begin, or a wait on a stream that may capture); a wrapped one also through its
  // owner, so it is always checked.
  std::atomic<uint64_t> capture_hint_;
  // Note [CUDA failures]; shared with the host functions enqueued here, which may outlive us.
  std::shared_ptr<FailureSink> failures_ = std::make_shared<FailureSink>();
};

/// Resolves the driver function CudaStream::is_capturing() calls (Note [Driver capture query] in
/// stream.cpp); called when the backend starts, so that no capture is under way.
void resolve_driver_capture_query() noexcept;

/// The cuda stream behind `stream`, or Error(InvalidArgument) naming `operation`.
inline CudaStream& as_cuda_stream(StreamImpl& stream, const char* operation) {
  return stream_cast<CudaStream>(stream, kBackendName, operation);
}

}  // namespace accgraph::detail::cuda
