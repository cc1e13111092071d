// Tests of pool_table.hpp: new ids, sharing by id, pools living while held, unknown ids, a
// failing factory, and concurrent acquisition.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "accgraph/spi/pool_table.hpp"
#include "check_error.hpp"

using accgraph::ErrorCode;
using accgraph::PoolId;
using accgraph::PoolTable;

namespace {

struct TestPool {
  PoolId id;
  int payload = 0;
};

auto make_with(int payload) {
  return [payload](PoolId id) {
    auto pool = std::make_shared<TestPool>();
    pool->id = id;
    pool->payload = payload;
    return pool;
  };
}

}  // namespace

TEST_CASE("new pools get increasing ids with the table's tag; an id shares its pool") {
  PoolTable<TestPool> table("test", 7);
  auto a = table.acquire(PoolId{}, make_with(1));
  auto b = table.acquire(PoolId{}, make_with(2));
  CHECK(a->id == PoolId{1, 7});
  CHECK(b->id == PoolId{2, 7});
  CHECK(table.live_pools() == 2);

  int factory_calls = 0;
  auto shared = table.acquire(a->id, [&](PoolId id) {
    ++factory_calls;
    return make_with(3)(id);
  });
  CHECK(shared.get() == a.get());  // the same object, not a copy
  CHECK(shared->payload == 1);
  CHECK(factory_calls == 0);
}

TEST_CASE("a pool lives while held; its id is then unknown and never reused") {
  PoolTable<TestPool> table("test");
  auto a = table.acquire(PoolId{}, make_with(1));
  const PoolId id = a->id;
  CHECK(id == PoolId{1, 0});
  a.reset();
  CHECK(table.live_pools() == 0);
  CHECK_ACCGRAPH_ERROR(table.acquire(id, make_with(0)), ErrorCode::InvalidArgument,
                       "capture_begin: no live graph pool has id {1, 0}: pass the pool() of a "
                       "test graph that still holds its capture, or {} for a new private pool");
  CHECK(table.acquire(PoolId{}, make_with(2))->id == PoolId{2, 0});
}

TEST_CASE("an unknown id is an InvalidArgument attributed to the backend") {
  PoolTable<TestPool> table("mybackend");
  try {
    table.acquire(PoolId{42, 9}, make_with(0));
    FAIL("an unknown pool id was accepted");
  } catch (const accgraph::Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(e.backend() == "mybackend");
    CHECK(e.message().find("{42, 9}") != std::string::npos);
  }
}

TEST_CASE("a factory that throws registers nothing and uses up no id") {
  PoolTable<TestPool> table("test");
  CHECK_THROWS_AS(table.acquire(PoolId{},
                                [](PoolId) -> std::shared_ptr<TestPool> {
                                  throw std::runtime_error("out of device memory");
                                }),
                  std::runtime_error);
  CHECK(table.live_pools() == 0);
  CHECK(table.acquire(PoolId{}, make_with(1))->id == PoolId{1, 0});
}

TEST_CASE("a factory that returns no pool, or one with another id, is a backend bug") {
  PoolTable<TestPool> table("test");
  CHECK_ACCGRAPH_ERROR(table.acquire(PoolId{}, [](PoolId) { return std::shared_ptr<TestPool>(); }),
                       ErrorCode::BackendError, "pool factory returned no pool");
  CHECK_ACCGRAPH_ERROR(table.acquire(PoolId{},
                                     [](PoolId) {
                                       auto pool = std::make_shared<TestPool>();
                                       pool->id = PoolId{99, 99};
                                       return pool;
                                     }),
                       ErrorCode::BackendError, "without the id it was given");
  CHECK(table.live_pools() == 0);
}

TEST_CASE("concurrent acquisition gives distinct ids and shares correctly") {
  PoolTable<TestPool> table("test");
  auto first = table.acquire(PoolId{}, make_with(0));
  constexpr int kThreads = 4, kPerThread = 200;
  std::vector<std::vector<std::shared_ptr<TestPool>>> made(kThreads);
  std::vector<int> shared_ok(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        made[t].push_back(table.acquire(PoolId{}, make_with(t)));
        shared_ok[t] += table.acquire(first->id, make_with(-1)) == first ? 1 : 0;
      }
    });
  for (std::thread& thread : threads) thread.join();
  std::vector<uint64_t> ids;
  for (const auto& list : made)
    for (const auto& pool : list) ids.push_back(pool->id.first);
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // all distinct
  CHECK(ids.size() == kThreads * kPerThread);
  CHECK(ids.front() == 2);
  CHECK(ids.back() == 1 + kThreads * kPerThread);
  for (int t = 0; t < kThreads; ++t) CHECK(shared_ok[t] == kPerThread);
  CHECK(table.live_pools() == 1 + kThreads * kPerThread);
}
