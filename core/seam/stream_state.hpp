// What a Stream holds (core-internal): the backend's StreamImpl plus what the core tracks, and
// the internal access the core and the timing layer need to it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/stream.hpp"

namespace accgraph {
class AcceleratorGraph;
}

namespace accgraph::detail {

// Owned through shared_ptr only (StreamAccess::create): its deleter aborts a capture that began
// on the stream, tells the observers (on_stream_destroy) so they drop what they keep per stream,
// then destroys the backend's queue.
struct StreamState {
  StreamState() = default;
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  std::unique_ptr<StreamImpl> impl;
  Backend* backend = nullptr;
  std::string backend_name;
  uint64_t id = 0;
  Capabilities capabilities;  // of the stream's device, read once at creation
  // The graph whose capture this stream began or joined (fork). Only meaningful while
  // impl->is_capturing(): Stream::capturing_graph() checks that before using it. A graph clears
  // it on its capture stream when the capture ends; a destroyed graph has ended its capture.
  AcceleratorGraph* capturing_graph = nullptr;
  // Operations enqueued through accgraph so far. Threads may share one Stream (Note [Streams]
  // in backend.hpp), so it is atomic; a relaxed load and store instead of an atomic add, since
  // only "did it change since the last region boundary" is asked, which a lost increment of two
  // racing ones still answers (and x86 pays nothing for it on the hot path).
  std::atomic<uint64_t> operations{0};
  void count_operation() noexcept {
    operations.store(operations.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // Note [Native captures]: whether the queue may capture without accgraph knowing: it was
  // wrapped from a native handle, its native handle was handed out, or it joined such a capture
  // (wait_for). A stream that is none of these captures only through AcceleratorGraph, which
  // sets capturing_graph, so StreamAccess::capturing need not ask the backend on the hot paths
  // (a region's begin and end, a timed replay).
  bool native = false;
  // The backend's CaptureTail for `impl`, or null (capture_tail_of, asked once when the core
  // creates or wraps the stream): Note [Boundary sharing] in timing/engine/region_recorder.cpp.
  CaptureTail* capture_tail = nullptr;
};

/// The core's and the timing layer's way to the shared state behind a Stream handle.
struct StreamAccess {
  /// A new, empty state with the deleter described at StreamState (destroy).
  static std::shared_ptr<StreamState> create();
  static void destroy(StreamState* state) noexcept;
  /// The state of `stream` (InvalidArgument naming `operation` when the Stream is empty).
  /// Exported (not installed) so that the timing units' own tests can link it.
  ACCGRAPH_API static const std::shared_ptr<StreamState>& shared(const Stream& stream,
                                                                 const char* operation);
  /// The backend's queue behind `stream` (InvalidArgument when the Stream is empty).
  static StreamImpl& impl(const Stream& stream) { return *stream.state().impl; }
  /// Operations enqueued through `stream` so far: two region boundaries share a marker only
  /// when none came between them (Note [Boundary sharing] in timing/engine/region_recorder.cpp).
  static uint64_t operation_count(const Stream& stream) {
    return stream.state().operations.load(std::memory_order_relaxed);
  }
  /// Whether `stream` may receive work accgraph does not see (Note [Native captures]).
  static bool native(const Stream& stream) { return stream.state().native; }
  /// The backend's capture tail token of `stream` (Note [Capture tail]): 0 when it cannot tell,
  /// also when the backend's stream has no CaptureTail.
  static uint64_t capture_tail(const Stream& stream) noexcept {
    const CaptureTail* tail = stream.state_ ? stream.state_->capture_tail : nullptr;
    return tail != nullptr ? tail->capture_tail() : 0;
  }
  /// Stream::is_capturing(), asking the backend only where the stream can be capturing: it is
  /// in an accgraph capture, or may be in a native one (Note [Native captures]).
  static bool capturing(const Stream& stream) {
    const StreamState& s = stream.state();
    return (s.capturing_graph != nullptr || s.native) && s.impl->is_capturing();
  }
  /// `joining` joined `graph`'s capture by a fork (Stream::wait); `graph` may be null (a native
  /// capture accgraph was not told about). The graph clears the link when its capture ends.
  static void join_capture(const std::shared_ptr<StreamState>& joining, AcceleratorGraph* graph);
  /// A second handle to a live queue, for the length of a call (hooks take a Stream&).
  static Stream handle(std::shared_ptr<StreamState> state) { return Stream(std::move(state)); }
};

}  // namespace accgraph::detail
