// Dispatch of lifecycle hooks to the installed observers (core-internal).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"

namespace accgraph::detail {

struct InstalledObserver {
  GraphObserver* observer;
  ObserverEvents events;
};
using ObserverList = std::vector<InstalledObserver>;

extern std::atomic<int> installed_observer_count;
extern std::atomic<int> replay_observer_count;  // installed with ObserverEvents::All

/// The installed observers (an immutable snapshot, so a hook may add or remove observers).
std::shared_ptr<const ObserverList> observer_snapshot();

/// Calls `fn(observer)` for each installed observer; one relaxed load when there are none.
template <class Fn>
inline void notify_observers(Fn&& fn) {
  if (installed_observer_count.load(std::memory_order_relaxed) == 0) return;
  std::shared_ptr<const ObserverList> observers = observer_snapshot();
  for (const InstalledObserver& installed : *observers) fn(*installed.observer);
}

/// The same for the replay hooks: only observers installed with ObserverEvents::All.
template <class Fn>
inline void notify_replay_observers(Fn&& fn) {
  if (replay_observer_count.load(std::memory_order_relaxed) == 0) return;
  std::shared_ptr<const ObserverList> observers = observer_snapshot();
  for (const InstalledObserver& installed : *observers)
    if (installed.events == ObserverEvents::All) fn(*installed.observer);
}

/// A hook one graph calls around each of its replays, with the state its subscriber keeps for
/// that graph (how a profiler reaches its per-graph timing state without a lookup, and how
/// graphs it does not time avoid it altogether). Core-internal: the timing layer implements it.
class ReplaySubscriber {
 public:
  virtual void before_replay(AcceleratorGraph& graph, Stream& stream, void* state) = 0;
  virtual void after_replay(AcceleratorGraph& graph, Stream& stream, void* state) = 0;
  /// A foreign graph's launch threw after before_replay (the owner's launch raised: it may or
  /// may not have launched). Never throws.
  virtual void after_failed_replay(AcceleratorGraph& graph, Stream& stream,
                                   void* state) noexcept = 0;

 protected:
  ~ReplaySubscriber() = default;
};

/// The core's and the timing layer's way to a graph's replay subscriptions.
struct GraphAccess {
  /// The backend's graph behind `graph`.
  static GraphImplInterface& impl(const AcceleratorGraph& graph) { return *graph.impl_; }
  /// During a foreign graph's launch: whether it is checked with a fence (LaunchCheck::Fenced).
  static bool fenced_launch(const AcceleratorGraph& graph) {
    return graph.is_foreign() && graph.fenced_launch_;
  }
  /// Until unsubscribe: each replay of `graph` calls `subscriber` with `state`.
  static void subscribe(AcceleratorGraph& graph, ReplaySubscriber& subscriber, void* state);
  static void unsubscribe(AcceleratorGraph& graph, ReplaySubscriber& subscriber) noexcept;
  /// Keeps `object` alive until `graph` drops its capture (reset, aborted capture, destruction):
  /// for storage its captured work writes into after the owner of that storage is gone.
  static void keep_alive(AcceleratorGraph& graph, std::shared_ptr<void> object);
};

}  // namespace accgraph::detail
