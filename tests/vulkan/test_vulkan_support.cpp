// Tests of the vulkan backend's pure helpers (no loader or driver needed): result names and
// check messages, tick conversion, the split of unaligned fills, and the buffer address table.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "vulkan_addresses.hpp"
#include "vulkan_check.hpp"
#include "vulkan_fill.hpp"
#include "vulkan_ticks.hpp"

using namespace accgraph;
using namespace accgraph::detail::vulkan;

TEST_CASE("VkResult names and the check message name the call and the code") {
  CHECK(result_name(VK_ERROR_DEVICE_LOST) == "VK_ERROR_DEVICE_LOST");
  CHECK(result_name(static_cast<VkResult>(-424242)) == "VkResult(-424242)");
  try {
    ACCGRAPH_VK_CHECK(VK_ERROR_OUT_OF_DEVICE_MEMORY, "allocate");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::BackendError);
    CHECK(e.message() ==
          "allocate: VK_ERROR_OUT_OF_DEVICE_MEMORY failed with VK_ERROR_OUT_OF_DEVICE_MEMORY "
          "(the device is out of memory): free buffers or allocate less");
  }
  const auto vkQueueSubmit = [](int) { return VK_ERROR_DEVICE_LOST; };
  try {
    ACCGRAPH_VK_CHECK(vkQueueSubmit(0), "replay");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.message().rfind("replay: vkQueueSubmit failed with VK_ERROR_DEVICE_LOST", 0) == 0);
  }
}

TEST_CASE("ticks convert with the period, across a wraparound, and windows are judged") {
  const TickConverter exact(1.0, 64);
  CHECK(exact.ticks_to_ns(123456789) == 123456789);
  CHECK(exact.resolution_ns() == 1);
  CHECK(exact.counter_period_ns() == UINT64_MAX);
  CHECK(exact.window_is_unambiguous(UINT64_MAX / 2));

  const TickConverter fractional(52.5, 64);  // exact in binary
  CHECK(fractional.ticks_to_ns(100) == 5250);
  CHECK(fractional.resolution_ns() == 53);

  const TickConverter narrow(1.0, 12);  // wraps every 4096 ns
  CHECK(narrow.counter_period_ns() == 4096);
  const uint64_t ticks[3] = {4000, 4090, 10};  // the third after a wraparound
  uint64_t ns[3];
  narrow.to_ns(ticks, 3, ns);
  CHECK(ns[0] == 4000);
  CHECK(ns[1] == 4090);
  CHECK(ns[2] == 4096 + 10);
  CHECK_FALSE(narrow.window_is_unambiguous(1000));  // 50 us margin > 4 us period

  const TickConverter bad(0.0, 0);  // defaults instead of nonsense
  CHECK(bad.period_ns() == 1.0);
  CHECK(bad.valid_bits() == 64);
}

TEST_CASE("an unaligned fill is split into pattern copies and one aligned vkCmdFillBuffer") {
  // Every byte of [offset, offset + bytes) is covered exactly once, fills are word-aligned.
  for (uint64_t offset = 0; offset < 9; ++offset)
    for (uint64_t bytes = 1; bytes < 24; ++bytes) {
      std::vector<int> covered(offset + bytes + 8, 0);
      for (const FillPiece& piece : plan_fill(offset, bytes)) {
        if (piece.kind == FillPiece::Kind::Fill) {
          CHECK(piece.offset % 4 == 0);
          CHECK(piece.bytes % 4 == 0);
        } else {
          CHECK(piece.bytes <= kPatternBytes);
        }
        for (uint64_t i = piece.offset; i < piece.offset + piece.bytes; ++i) ++covered[i];
      }
      for (uint64_t i = 0; i < covered.size(); ++i)
        CHECK(covered[i] == (i >= offset && i < offset + bytes ? 1 : 0));
    }
  CHECK(plan_fill(0, 4096).size() == 1);
  CHECK(fill_word(0x5a) == 0x5a5a5a5au);
}

TEST_CASE("the address table resolves pointers inside one buffer only") {
  AddressTable table;
  const auto buffer_a = reinterpret_cast<VkBuffer>(uintptr_t{0x10});
  const auto buffer_b = reinterpret_cast<VkBuffer>(uintptr_t{0x20});
  table.insert({0x1000, 0x100, buffer_a, 0});
  table.insert({0x1100, 0x40, buffer_b, 1});
  auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  REQUIRE(table.find(at(0x1000), 0x100));
  CHECK(table.find(at(0x1010), 0x10)->offset == 0x10);
  CHECK(table.find(at(0x1010), 0x10)->entry.buffer == buffer_a);
  CHECK(table.find(at(0x1100), 1)->entry.device == 1);
  CHECK_FALSE(table.find(at(0x10f0), 0x20));  // crosses into the next buffer
  CHECK_FALSE(table.find(at(0x0fff), 1));     // before every buffer
  CHECK_FALSE(table.find(at(0x1140), 1));     // just past the last one
  table.erase(0x1000);
  CHECK_FALSE(table.find(at(0x1000), 1));
  CHECK(table.size() == 1);
}
