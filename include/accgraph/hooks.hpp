// Lifecycle hooks: observers that see every graph's capture, instantiation, replay and
// destruction (how a profiler attaches transparently). They cost one relaxed atomic load per
// call when none is installed; a replay costs that load only, unless an observer asked for
// replay hooks (ObserverEvents::All) or a profiler times that graph.
#pragma once

#include <memory>

#include "accgraph/export.hpp"

namespace accgraph {

class AcceleratorGraph;
class Stream;

/// Override what you need. Called on the thread that drives the graph. An exception from a
/// capture hook aborts that capture (graph reset) and propagates; exceptions from replay hooks
/// propagate; on_destroy must not throw.
class ACCGRAPH_API GraphObserver {
 public:
  virtual ~GraphObserver();
  /// After the backend began capturing: work enqueued here is recorded into the graph.
  virtual void on_capture_begin(AcceleratorGraph& graph, Stream& stream);
  /// Before the backend ends the capture: the last chance to record into the graph.
  virtual void on_capture_ending(AcceleratorGraph& graph, Stream& stream);
  /// After a successful capture_end.
  virtual void on_capture_end(AcceleratorGraph& graph);
  virtual void on_instantiate(AcceleratorGraph& graph);
  /// Before and after the backend enqueues one replay (not its completion).
  virtual void on_replay_begin(AcceleratorGraph& graph, Stream& stream);
  virtual void on_replay_end(AcceleratorGraph& graph, Stream& stream);
  /// Before the graph drops its capture (reset, aborted capture, re-capture).
  virtual void on_reset(AcceleratorGraph& graph);
  virtual void on_destroy(AcceleratorGraph& graph) noexcept;
  /// A Stream is being destroyed (its last handle died): drop what is kept per stream. Called
  /// before the backend's queue goes, on the destroying thread, with a handle that is valid
  /// only during the call (it may still enqueue work); must not throw.
  virtual void on_stream_destroy(Stream& stream) noexcept;
};

/// Keeps an observer installed; removing happens in remove() or the destructor. Move-only.
class ACCGRAPH_API ObserverHandle {
 public:
  ObserverHandle() = default;
  explicit ObserverHandle(GraphObserver* observer) : observer_(observer) {}
  ObserverHandle(ObserverHandle&& other) noexcept : observer_(other.observer_) {
    other.observer_ = nullptr;
  }
  ObserverHandle& operator=(ObserverHandle&& other) noexcept;
  ObserverHandle(const ObserverHandle&) = delete;
  ObserverHandle& operator=(const ObserverHandle&) = delete;
  ~ObserverHandle();
  void remove() noexcept;

 private:
  GraphObserver* observer_ = nullptr;
};

/// Which hooks an observer installed for every graph receives.
enum class ObserverEvents {
  All,        ///< every hook
  Lifecycle,  ///< every hook but on_replay_begin/on_replay_end: replays pay nothing for it
};

/// Installs an observer for every graph in the process until the handle is dropped. The
/// observer must outlive the handle. Thread-safe. Replays call only the observers installed
/// with ObserverEvents::All (and the profilers timing that graph), so an observer that does not
/// need replays should ask for ObserverEvents::Lifecycle.
[[nodiscard]] ACCGRAPH_API ObserverHandle
add_graph_observer(GraphObserver& observer, ObserverEvents events = ObserverEvents::All);

}  // namespace accgraph
