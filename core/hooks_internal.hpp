// Dispatch of lifecycle hooks to the installed observers (core-internal).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "accgraph/hooks.hpp"

namespace accgraph::detail {

using ObserverList = std::vector<GraphObserver*>;

extern std::atomic<int> installed_observer_count;

/// The installed observers (an immutable snapshot, so a hook may add or remove observers).
std::shared_ptr<const ObserverList> observer_snapshot();

/// Calls `fn(observer)` for each installed observer; one relaxed load when there are none.
template <class Fn>
inline void notify_observers(Fn&& fn) {
  if (installed_observer_count.load(std::memory_order_relaxed) == 0) return;
  std::shared_ptr<const ObserverList> observers = observer_snapshot();
  for (GraphObserver* observer : *observers) fn(*observer);
}

}  // namespace accgraph::detail
