// The process-wide list of graph observers (lifecycle hooks).
#include <algorithm>
#include <mutex>

#include "accgraph/error.hpp"
#include "internal/observers.hpp"

namespace accgraph {

GraphObserver::~GraphObserver() = default;
void GraphObserver::on_capture_begin(AcceleratorGraph&, Stream&) {}
void GraphObserver::on_capture_ending(AcceleratorGraph&, Stream&) {}
void GraphObserver::on_capture_end(AcceleratorGraph&) {}
void GraphObserver::on_instantiate(AcceleratorGraph&) {}
void GraphObserver::on_replay_begin(AcceleratorGraph&, Stream&) {}
void GraphObserver::on_replay_end(AcceleratorGraph&, Stream&) {}
void GraphObserver::on_reset(AcceleratorGraph&) {}
void GraphObserver::on_destroy(AcceleratorGraph&) noexcept {}
void GraphObserver::on_stream_destroy(Stream&) noexcept {}

namespace detail {

std::atomic<int> installed_observer_count{0};
std::atomic<int> replay_observer_count{0};

namespace {

struct ObserverRegistry {
  std::mutex mutex;
  std::shared_ptr<const ObserverList> observers = std::make_shared<const ObserverList>();
};

ObserverRegistry& observer_registry() {
  // Leaked on purpose: graphs destroyed during static destruction still notify observers.
  static ObserverRegistry* registry = new ObserverRegistry();
  return *registry;
}

}  // namespace

std::shared_ptr<const ObserverList> observer_snapshot() {
  ObserverRegistry& registry = observer_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return registry.observers;
}

}  // namespace detail

namespace {

detail::ObserverList::iterator find_observer(detail::ObserverList& list, GraphObserver* observer) {
  return std::find_if(list.begin(), list.end(), [&](const detail::InstalledObserver& installed) {
    return installed.observer == observer;
  });
}

}  // namespace

ObserverHandle add_graph_observer(GraphObserver& observer, ObserverEvents events) {
  detail::ObserverRegistry& registry = detail::observer_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto next = std::make_shared<detail::ObserverList>(*registry.observers);
  if (find_observer(*next, &observer) != next->end())
    throw Error(ErrorCode::InvalidArgument,
                "add_graph_observer: this observer is already installed: keep the first handle");
  next->push_back({&observer, events});
  registry.observers = std::move(next);
  detail::installed_observer_count.fetch_add(1, std::memory_order_relaxed);
  if (events == ObserverEvents::All)
    detail::replay_observer_count.fetch_add(1, std::memory_order_relaxed);
  return ObserverHandle(&observer);
}

ObserverHandle& ObserverHandle::operator=(ObserverHandle&& other) noexcept {
  if (this != &other) {
    remove();
    observer_ = other.observer_;
    other.observer_ = nullptr;
  }
  return *this;
}

ObserverHandle::~ObserverHandle() { remove(); }

void ObserverHandle::remove() noexcept {
  if (observer_ == nullptr) return;
  detail::ObserverRegistry& registry = detail::observer_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto next = std::make_shared<detail::ObserverList>(*registry.observers);
  auto found = find_observer(*next, observer_);
  if (found != next->end()) {
    if (found->events == ObserverEvents::All)
      detail::replay_observer_count.fetch_sub(1, std::memory_order_relaxed);
    next->erase(found);
    detail::installed_observer_count.fetch_sub(1, std::memory_order_relaxed);
  }
  registry.observers = std::move(next);
  observer_ = nullptr;
}

}  // namespace accgraph
