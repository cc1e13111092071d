// Collector (collector.hpp).
#include "collector.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"

namespace accgraph::timing {

void Collector::start(std::chrono::microseconds period) {
  thread_ = std::thread([this, period] { run(period); });
}

void Collector::stop() noexcept {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Collector::run(std::chrono::microseconds period) {
  std::unique_lock<std::mutex> lock(thread_mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    try {
      collect_completed();
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("timing: the background collector failed: {}", e.what()));
    } catch (...) {
      log(LogLevel::Warning,
          "timing: the background collector failed with a non-standard exception");
    }
    lock.lock();
  }
}

void Collector::add(std::shared_ptr<MarkerRing> ring) {
  std::lock_guard<std::mutex> lock(rings_mutex_);
  rings_.push_back(std::move(ring));
}

std::vector<std::shared_ptr<MarkerRing>> Collector::rings_snapshot() const {
  std::lock_guard<std::mutex> lock(rings_mutex_);
  return rings_;
}

bool Collector::collect_oldest(MarkerRing& ring, uint64_t before) {
  // A raised foreign launch is collected without a report (Note [Launch fences]).
  MarkerRing::Collected next = ring.collect_next(before);
  if (!next.report) return next.collected;
  store_.deliver(std::move(*next.report));
  // Note [Recycled times] in marker_ring.cpp: a report that was not kept (deliver() moves a
  // kept one away, leaving no times) still owns its times, and is dropped here; its storage
  // goes back to the ring. The const_cast is on our own, non-const report.
  ring.recycle_times(std::move(const_cast<std::vector<uint64_t>&>(next.report->marker_times())));
  return next.collected;
}

void Collector::make_room(MarkerRing& ring) {
  if (!ring.full()) return;
  std::lock_guard<std::recursive_mutex> delivery(delivery_);
  while (ring.full()) collect_oldest(ring);
}

// Note [Bounded collection]: a sink may launch what makes another report of the ring it is
// being delivered from (it replays the graph whose report it got, or times its own work with an
// eager region on the stream). Collecting "until the ring is empty" then never ends: flush()
// delivered 400,000 reports in 10 s and never returned (tests/python/test_threads.py). So a
// collection (flush, collect_all, the background pass) takes only the sequences queued when it
// began; what its sinks launch is pending for the next one (flush again, the collector, a full
// ring).
void Collector::collect_all(MarkerRing& ring) {
  std::lock_guard<std::recursive_mutex> delivery(delivery_);
  const uint64_t before = ring.queued();
  while (collect_oldest(ring, before)) {
  }
}

void Collector::flush() {
  std::lock_guard<std::recursive_mutex> delivery(delivery_);
  std::exception_ptr first_failure;
  for (const auto& ring : rings_snapshot()) {
    try {
      collect_all(*ring);
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void Collector::collect_completed() {
  std::lock_guard<std::recursive_mutex> delivery(delivery_);
  for (const auto& ring : rings_snapshot()) {
    const uint64_t before = ring->queued();  // Note [Bounded collection]
    while (ring->oldest_complete() && collect_oldest(*ring, before)) {
    }
  }
}

void Collector::retire(const std::shared_ptr<MarkerRing>& ring) {
  std::exception_ptr failure;
  try {
    collect_all(*ring);
    ring->wait_last_launch();
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(rings_mutex_);
    rings_.erase(std::remove(rings_.begin(), rings_.end(), ring), rings_.end());
  }
  if (failure) std::rethrow_exception(failure);
}

void Collector::retire_noexcept(const std::shared_ptr<MarkerRing>& ring,
                                const char* what) noexcept {
  try {
    retire(ring);
  } catch (const std::exception& e) {
    log(LogLevel::Warning, fmt::format("timing: {} failed: {}", what, e.what()));
  } catch (...) {
    log(LogLevel::Warning, fmt::format("timing: {} failed with a non-standard exception", what));
  }
}

}  // namespace accgraph::timing
