// ForeignGraph: a graph captured and launched by someone else (a framework, or code calling the
// native API), told to accgraph so that profilers time it exactly like an AcceleratorGraph.
#pragma once

#include <memory>
#include <string_view>
#include <type_traits>

#include "accgraph/export.hpp"
#include "accgraph/graph.hpp"

namespace accgraph {

class Stream;

/// Note [Foreign graphs]: a framework's graph (a torch.cuda.CUDAGraph, a cudaGraphExec_t launched
/// with cudaGraphLaunch, a Level Zero graph or command list the application executes) is timed
/// through this handle. It holds an AcceleratorGraph whose backend graph does nothing itself:
/// the owner captures and launches natively and tells the handle when, and the handle raises the
/// same lifecycle hooks an AcceleratorGraph raises (capture begin, capture ending, replay
/// begin/end, reset, destroy). A profiler cannot tell the two apart: the same marker ring, the
/// same reports, the same guarantees (no host synchronisation per region, no report lost), and
/// attach_all() times foreign graphs too.
///
/// The owner's calls, in order (a CUDA example; `s` wraps the native stream, Stream::wrap):
///
///   cudaStreamBeginCapture(raw, cudaStreamCaptureModeGlobal);   // the owner's native capture
///   foreign.capture_begin(s);              // regions on s now record into the capture
///   { auto r = profiler.region(s, "layer0");  my_kernel<<<1, 1, 0, raw>>>(); }
///   foreign.capture_end();                 // the last markers, before the native end
///   cudaStreamEndCapture(raw, &graph);  cudaGraphInstantiate(&exec, graph, 0);
///   for (...) foreign.launch(s, [&] { cudaGraphLaunch(exec, raw); });   // one report each
///   foreign.reset();                       // or destroy the handle: before the native graph goes
///
/// Rules:
/// - capture_begin(s): `s` must already be capturing natively (its backend reports
///   is_capturing()) and not into another accgraph graph; capture modes and pools are the
///   owner's business.
/// - capture_end(): called while the native capture is still open, right before the owner ends
///   it; work enqueued on `s` after it is not timed.
/// - launch(s, fn): `fn` must enqueue exactly one execution of the captured graph on `s` (or on
///   the native queue `s` wraps) and nothing else; the marker ring is made ready before `fn` runs
///   and the execution is numbered after it returns. An exception from `fn` propagates and
///   counts no execution.
/// - reset(): before the native graph is destroyed or captured again (the profiler collects the
///   executions still pending, which needs the graph's markers to run); destroying the handle
///   does the same. Afterwards the native graph must not be launched again, and a reset (or the
///   wrapped Stream's destruction) while the native capture is still open releases the marker
///   storage that capture recorded into: end or abandon the native capture first, and never
///   launch what it produced.
/// - Backends: a wrapped queue's is_capturing() must report a capture its owner began natively
///   (CUDA asks cudaStreamIsCapturing; Level Zero asks the graph extension for wrapped lists).
/// - The handle is used by one thread at a time, like an AcceleratorGraph.
/// Whether ForeignGraph::launch checks what the owner's launch did (Note [Launch fences] in
/// timing/engine/marker_ring.cpp).
enum class LaunchCheck {
  /// A fence after each launch of a graph with regions: a launch that ran nothing or twice is
  /// reported unmeasurable, and no wait can hang on it. Costs one eager marker sequence a launch.
  Fenced,
  /// For an owner whose launch enqueues exactly one execution by construction, or raises before
  /// launching, also on a stream that is capturing (PyTorch's CUDAGraph.replay launches its
  /// executable once, and refuses a capturing stream): no fence, and the stream is not asked
  /// whether it captures (Note [Trusted launches and captures] in timing/engine/graph_timing.cpp).
  /// A launch that breaks the rule can then make flush() wait forever.
  Trusted,
};

/// Note [Launch waits]: around the owner's launch, a timed launch does short work that waits for
/// no other thread, except where the timing must wait: a full marker ring (its oldest replay is
/// collected and delivered, calling sinks, and another thread may be delivering), Immediate
/// delivery (sinks), the first launch of a capture (the marker overhead is measured), replay
/// observers (user code), and a marker ring whose lock a collecting thread holds (it may be
/// waiting for the device). A caller that holds a lock which code on other threads may need
/// meanwhile (Python's GIL: a Python sink on the background collector's thread takes it) passes
/// a LaunchWaits: the launch calls release() before each such wait and reacquire() after it, on
/// the launching thread, and keeps to that pairing when it throws; the caller holds its lock
/// everywhere else, `fn` included (the usual launch: room in the ring, lazy delivery, the ring's
/// lock free, gives it up nowhere).
class LaunchWaits {
 public:
  virtual void release() noexcept = 0;
  virtual void reacquire() noexcept = 0;

 protected:
  ~LaunchWaits() = default;
};

/// Note [Untimed foreign replays] (spi/untimed_replay.hpp): whether ForeignGraph::capture_end
/// copies the owner's capture, so that sampled timing can launch the replays it does not time
/// without markers.
enum class UntimedCopy {
  None,  ///< every replay runs the owner's launch
  /// Copy it where the backend can (CUDA: a capture without memory or event record nodes);
  /// launched instead of the owner's launch only after enable_untimed_launches(true).
  Make,
};

class ACCGRAPH_API ForeignGraph {
 public:
  /// A foreign graph whose work runs on streams of `backend` (empty: the default backend).
  explicit ForeignGraph(std::string_view backend = {});
  ForeignGraph(const ForeignGraph&) = delete;
  ForeignGraph& operator=(const ForeignGraph&) = delete;
  /// Like reset(), then the hooks' on_destroy; never throws.
  ~ForeignGraph();

  /// The owner's native capture has begun on `stream` (see the rules above).
  void capture_begin(Stream& stream);
  /// The owner is about to end its native capture.
  void capture_end();
  /// The same, and `copy` says whether the capture is copied for untimed replays.
  void capture_end(UntimedCopy copy);
  /// The owner states that its launch `fn` enqueues the captured graph and nothing else (no
  /// state of its own moves, as PyTorch's RNG prologue moves its generators' offsets): then a
  /// replay that the profiler's sampling does not time launches the capture's copy without
  /// markers (capture_end(UntimedCopy::Make)) instead of calling `fn`. Off by default.
  void enable_untimed_launches(bool enabled) noexcept;
  /// Whether the last capture_end made a copy for untimed replays (reset drops it).
  bool has_untimed_copy() const noexcept;
  /// The owner launches the graph on `stream` through `launch` (see the rules above).
  /// `waits`: see Note [Launch waits] (null: nothing to release).
  template <class Launch>
  void launch(Stream& stream, Launch&& launch, LaunchCheck check = LaunchCheck::Fenced,
              LaunchWaits* waits = nullptr) {
    using Fn = std::remove_reference_t<Launch>;
    launch_with(
        stream, [](void* fn) { (*static_cast<Fn*>(fn))(); },
        const_cast<void*>(static_cast<const void*>(&launch)), check, waits);
  }
  /// The owner drops its graph, or its capture failed: the graph may capture again.
  void reset();

  /// The graph the hooks and profilers see (id, state, device, replay_count); use
  /// Profiler::attach(foreign) to time it. Its replay() is an error: launch through launch().
  const AcceleratorGraph& graph() const noexcept { return *graph_; }
  AcceleratorGraph& graph() noexcept { return *graph_; }
  uint64_t id() const noexcept { return graph_->id(); }
  GraphState state() const noexcept { return graph_->state(); }

 private:
  /// launch() without the template: `call(context)` runs the owner's launch.
  void launch_with(Stream& stream, void (*call)(void*), void* context, LaunchCheck check,
                   LaunchWaits* waits);
  /// The same without LaunchWaits: the symbol that code compiled against the headers before
  /// LaunchWaits calls.
  void launch_with(Stream& stream, void (*call)(void*), void* context, LaunchCheck check);

  std::unique_ptr<AcceleratorGraph> graph_;
};

}  // namespace accgraph
