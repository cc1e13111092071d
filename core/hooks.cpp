// The process-wide list of graph observers (lifecycle hooks).
#include <algorithm>
#include <mutex>

#include "accgraph/error.hpp"
#include "hooks_internal.hpp"

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

ObserverHandle add_graph_observer(GraphObserver& observer) {
  detail::ObserverRegistry& registry = detail::observer_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto next = std::make_shared<detail::ObserverList>(*registry.observers);
  if (std::find(next->begin(), next->end(), &observer) != next->end())
    throw Error(ErrorCode::InvalidArgument,
                "add_graph_observer: this observer is already installed: keep the first handle");
  next->push_back(&observer);
  registry.observers = std::move(next);
  detail::installed_observer_count.fetch_add(1, std::memory_order_relaxed);
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
  next->erase(std::remove(next->begin(), next->end(), observer_), next->end());
  registry.observers = std::move(next);
  detail::installed_observer_count.fetch_sub(1, std::memory_order_relaxed);
  observer_ = nullptr;
}

}  // namespace accgraph
