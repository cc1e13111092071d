// Internal to the in-tree module backends (level_zero, vulkan): the base of a graph that shares
// no memory pool with other graphs (Note [Private pool graphs]).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/types.hpp"

namespace accgraph::detail {

/// Note [Private pool graphs]: level_zero and vulkan graphs share no memory pool
/// (Capabilities::pool_sharing is false, so the core passes only new private pools, Note
/// [Capability gates] in accgraph/spi/backend.hpp): each capture takes a new pool id, from one
/// counter per module, and pool() reports it. Their destructors reset() the graph, which must not
/// throw there, so a failure is logged as a warning instead. A graph holds the backend's shared
/// `Runtime`, which (destroyed after every member of the derived graph) outlives what the graph
/// made from it. Both count what stats() reports alike: the captured operations and the
/// executables built.
template <class Runtime>
class PrivatePoolGraph : public GraphImplInterface {
 public:
  explicit PrivatePoolGraph(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  PoolId pool() const override { return pool_id_; }

  GraphStats stats() const override {
    GraphStats stats;
    stats.nodes = captured_operations();
    stats.instantiations = instantiations_;
    return stats;
  }

 protected:
  /// The operations of the captured graph (GraphStats::nodes).
  virtual size_t captured_operations() const noexcept = 0;

  /// An executable was built from scratch (GraphStats::instantiations).
  void count_instantiation() noexcept { ++instantiations_; }

  Runtime& runtime() const noexcept { return *runtime_; }

  /// Gives the capture being begun a new pool id, which pool() returns from now on.
  void take_new_pool_id() noexcept {
    static std::atomic<uint64_t> next_id{1};
    pool_id_ = PoolId{next_id.fetch_add(1), 0};
  }

  /// For the derived destructor, which must not throw: reset(), a failure logged as a warning
  /// that names `backend`.
  void reset_for_destructor(const char* backend) noexcept {
    try {
      reset();
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("{}: destroying a graph: {}", backend, e.what()));
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  PoolId pool_id_;
  uint64_t instantiations_ = 0;
};

}  // namespace accgraph::detail
