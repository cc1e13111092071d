// SPI helper for backends: the table of graph memory pools that graphs share by PoolId.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "accgraph/error.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

/// Note [Pool sharing]: capture_begin(stream, pool, mode) with pool {0, 0} gives the graph a new
/// private pool; with the pool() of another graph it shares that graph's pool. A pool lives
/// while any graph holds it (the graphs hold shared_ptrs; the table only weak ones), so an id
/// names a live pool or none. PoolTable is that bookkeeping, for every backend to reuse: the
/// backend says what a pool *is* (`Pool`, which has a member `PoolId id`; the host backend's is
/// only an identity, the cuda backend's owns a cudaMemPool_t) and how to make one.
///
///   struct MyPool { accgraph::PoolId id; my_pool_handle handle; ~MyPool(); };
///   accgraph::PoolTable<MyPool> pools_{"mybackend"};
///   std::shared_ptr<MyPool> pool = pools_.acquire(id, [&](accgraph::PoolId new_id) {
///     auto p = std::make_shared<MyPool>(); p->id = new_id; p->handle = create(); return p;
///   });
///
/// Thread-safe. Ids are {1, tag}, {2, tag}, ... in creation order and never reused; `tag` (0 by
/// default, as PyTorch numbers graph-private pools) lets a backend tell its ids from others'.
template <typename Pool>
class PoolTable {
 public:
  explicit PoolTable(std::string backend, uint64_t tag = 0)
      : backend_(std::move(backend)), tag_(tag) {}

  /// {0, 0}: a new pool from make(new_id) (a shared_ptr<Pool> whose id is new_id; it may throw,
  /// and then nothing is registered). Otherwise the live pool with that id, or
  /// Error(InvalidArgument) naming the id and what to pass instead. make runs under the table's
  /// lock: it must not call back into the table.
  template <typename Make>
  std::shared_ptr<Pool> acquire(PoolId id, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!id.is_new_private()) {
      auto it = pools_.find({id.first, id.second});
      std::shared_ptr<Pool> existing = it == pools_.end() ? nullptr : it->second.lock();
      if (!existing)
        throw Error(ErrorCode::InvalidArgument,
                    "capture_begin: no live graph pool has id {" + std::to_string(id.first) + ", " +
                        std::to_string(id.second) + "}: pass the pool() of a " + backend_ +
                        " graph that still holds its capture, or {} for a new private pool",
                    backend_);
      return existing;
    }
    for (auto it = pools_.begin(); it != pools_.end();)  // forget pools no graph holds
      it = it->second.expired() ? pools_.erase(it) : std::next(it);
    const PoolId new_id{next_, tag_};
    std::shared_ptr<Pool> pool = make(new_id);
    if (!pool || !(pool->id == new_id))
      throw Error(ErrorCode::BackendError,
                  "capture_begin: the " + backend_ +
                      " backend's pool factory returned no pool, or one without the id it was "
                      "given (a bug in the backend)",
                  backend_);
    ++next_;
    pools_[{new_id.first, new_id.second}] = pool;
    return pool;
  }

  /// For a Pool that is only an identity (nothing to create: the graphs of a backend whose
  /// device is the CPU allocate nothing during capture): acquire(id, make) with a make that
  /// default-constructs the Pool and sets its id.
  std::shared_ptr<Pool> acquire(PoolId id) {
    return acquire(id, [](PoolId new_id) {
      auto pool = std::make_shared<Pool>();
      pool->id = new_id;
      return pool;
    });
  }

  /// How many pools are alive (held by some graph). For tests and debug output.
  size_t live_pools() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t live = 0;
    for (const auto& entry : pools_) live += entry.second.expired() ? 0 : 1;
    return live;
  }

 private:
  const std::string backend_;
  const uint64_t tag_;
  mutable std::mutex mutex_;
  uint64_t next_ = 1;
  std::map<std::pair<uint64_t, uint64_t>, std::weak_ptr<Pool>> pools_;
};

}  // namespace accgraph
