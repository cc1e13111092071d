// Dispatch of lifecycle hooks to the installed observers (core-internal, not installed).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

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

}  // namespace accgraph::detail
