// Tests of the Level Zero backend's pure helpers, without a driver: tick conversion and
// wraparound masking, capture-path choice, and ze_result_t -> name, message and error code.
#include <algorithm>

#include <doctest/doctest.h>

#include "level_zero_capture_path.hpp"
#include "level_zero_check.hpp"
#include "level_zero_ticks.hpp"

namespace lz = accgraph::detail::level_zero;
using accgraph::ErrorCode;

TEST_CASE("ticks -> ns: 1_2 properties report Hz, the old ones truncated ns per tick") {
  // A 19.2 MHz timer: 52.083 ns per tick. The 1.0 properties can only say 52.
  auto exact = lz::TickConverter::from_frequency_hz(19'200'000, 64);
  auto truncated = lz::TickConverter::from_ns_per_tick(52, 64);
  CHECK(exact.ticks_to_ns(19'200'000) == 1'000'000'000);    // one second is one second
  CHECK(truncated.ticks_to_ns(19'200'000) == 998'400'000);  // 0.16% short, as the driver says
  CHECK(exact.ticks_to_ns(1) == 52);
  CHECK(exact.resolution_ns() == 53);  // rounded up
  CHECK(truncated.resolution_ns() == 52);
  // 1 GHz (the CPU test driver): 1 tick = 1 ns.
  auto ghz = lz::TickConverter::from_frequency_hz(1'000'000'000, 64);
  CHECK(ghz.ticks_to_ns(123456789) == 123456789);
  CHECK(ghz.resolution_ns() == 1);
  // No 64-bit overflow in ticks * 1e9 (2^50 * 1e9 needs 80 bits); a result beyond 64 bits
  // saturates instead of wrapping.
  CHECK(exact.ticks_to_ns(uint64_t{1} << 50) ==
        uint64_t((static_cast<unsigned __int128>(1) << 50) * 1'000'000'000 / 19'200'000));
  CHECK(exact.ticks_to_ns(uint64_t{1} << 62) == ~uint64_t{0});
  // Nonsense properties fall back to sane values instead of dividing by zero.
  CHECK(lz::TickConverter::from_frequency_hz(0, 0).ticks_to_ns(5) == 5);
  CHECK(lz::TickConverter::from_ns_per_tick(0, 0).resolution_ns() == 1);
}

TEST_CASE("ticks -> ns: differences are masked to the valid bits, across a wraparound") {
  auto t = lz::TickConverter::from_frequency_hz(1'000'000'000, 32);
  CHECK(t.valid_bits() == 32);
  CHECK(t.mask() == 0xffffffffull);
  CHECK(t.elapsed_ns(100, 350) == 250);
  // The counter wrapped between the two stamps: 0xffffff00 -> 0x100 is 0x200 ticks later.
  CHECK(t.elapsed_ns(0xffffff00ull, 0x100ull) == 0x200);
  // Bits above the valid ones are garbage and ignored.
  CHECK(t.elapsed_ns(0xdead0000'ffffff00ull, 0xbeef0000'00000100ull) == 0x200);
  // 64 valid bits: plain unsigned difference, also across 2^64.
  auto full = lz::TickConverter::from_frequency_hz(1'000'000'000, 64);
  CHECK(full.mask() == ~0ull);
  CHECK(full.elapsed_ns(~0ull - 9, 10) == 20);
  // Out-of-range valid bits mean 64.
  CHECK(lz::TickConverter::from_frequency_hz(1'000'000'000, 99).valid_bits() == 64);

  SUBCASE("a sequence stays monotonic across wraparounds") {
    auto small = lz::TickConverter::from_ns_per_tick(10, 8);  // period 256 ticks = 2560 ns
    const uint64_t ticks[] = {250, 10, 200, 5, 6};            // wraps after the 1st and the 3rd
    uint64_t ns[5] = {};
    small.to_ns(ticks, 5, ns);
    CHECK(ns[0] == 2500);
    CHECK(ns[1] == 2500 + 16 * 10);
    CHECK(ns[2] == 2500 + 16 * 10 + 190 * 10);
    CHECK(ns[3] == 2500 + 16 * 10 + 190 * 10 + 61 * 10);
    CHECK(ns[4] == ns[3] + 10);
    uint64_t untouched = 7;
    small.to_ns(ticks, 0, &untouched);
    CHECK(untouched == 7);
    // In place: each stamp is read before its slot is overwritten.
    uint64_t in_place[] = {250, 10, 200, 5, 6};
    small.to_ns(in_place, 5, in_place);
    CHECK(std::equal(in_place, in_place + 5, ns));
  }
}

TEST_CASE("ticks -> ns: the counter's period, and which windows it places exactly") {
  auto ns_ticks = lz::TickConverter::from_frequency_hz(1'000'000'000, 26);
  CHECK(ns_ticks.period_ns() == (uint64_t{1} << 26));  // 67.1 ms
  CHECK(lz::TickConverter::from_ns_per_tick(52, 32).period_ns() == (uint64_t{52} << 32));
  CHECK(lz::TickConverter::from_frequency_hz(19'200'000, 36).period_ns() == 3'579'139'413'333);
  CHECK(lz::TickConverter::from_frequency_hz(1'000'000'000, 64).period_ns() == ~uint64_t{0});
  // Sub-ns ticks: ns = ticks * 10^9 / hz.
  CHECK(lz::TickConverter::from_frequency_hz(1'000'000'000'000, 63).period_ns() ==
        (uint64_t{1} << 63) / 1000);

  // Window + 1/64 of it + 50 us must stay below the period.
  CHECK(ns_ticks.window_is_unambiguous(0));
  CHECK(ns_ticks.window_is_unambiguous(60'000'000));
  CHECK_FALSE(ns_ticks.window_is_unambiguous(66'100'000));  // 66.1 + 1.03 + 0.05 ms > 67.1 ms
  CHECK_FALSE(ns_ticks.window_is_unambiguous(uint64_t{1} << 26));
  CHECK_FALSE(ns_ticks.window_is_unambiguous(~uint64_t{0}));
  auto tiny = lz::TickConverter::from_frequency_hz(1'000'000'000, 12);  // 4.1 us
  CHECK_FALSE(tiny.window_is_unambiguous(0));  // the fixed margin alone is longer
  auto wide = lz::TickConverter::from_frequency_hz(1'000'000'000, 64);
  CHECK(wide.window_is_unambiguous(uint64_t{1} << 62));
}

TEST_CASE(
    "capture path: native graphs only with the extension, the capability and every entry point") {
  lz::GraphSupport none;
  lz::PathChoice c = lz::choose_capture_path(none);
  CHECK(c.path == lz::CapturePath::CommandList);
  CHECK(c.flavor == lz::GraphFlavor::None);
  CHECK(c.reason == "the driver advertises no record-and-replay graph extension");

  lz::GraphSupport ext;
  ext.ext_advertised = true;
  ext.ext_flags = lz::kGraphFlagImmutable;
  c = lz::choose_capture_path(ext);
  CHECK(c.path == lz::CapturePath::NativeGraph);
  CHECK(c.flavor == lz::GraphFlavor::Ext);
  CHECK(c.reason == "ZE_extension_record_replay_graph");

  SUBCASE("the stable flavour is preferred when both are usable") {
    lz::GraphSupport both = ext;
    both.exp_advertised = true;
    both.exp_flags = lz::kGraphFlagImmutable;
    CHECK(lz::choose_capture_path(both).flavor == lz::GraphFlavor::Ext);
  }
  SUBCASE("the experimental flavour when only it is usable") {
    lz::GraphSupport exp;
    exp.exp_advertised = true;
    exp.exp_flags = lz::kGraphFlagImmutable | lz::kGraphFlagMutable;
    c = lz::choose_capture_path(exp);
    CHECK(c.path == lz::CapturePath::NativeGraph);
    CHECK(c.flavor == lz::GraphFlavor::Exp);
    // Ext advertised without the capability: falls through to Exp.
    exp.ext_advertised = true;
    CHECK(lz::choose_capture_path(exp).flavor == lz::GraphFlavor::Exp);
  }
  SUBCASE("advertised without the immutable-graph capability") {
    lz::GraphSupport weak;
    weak.ext_advertised = true;
    weak.ext_flags = lz::kGraphFlagMutable;
    c = lz::choose_capture_path(weak);
    CHECK(c.path == lz::CapturePath::CommandList);
    CHECK(c.reason.find("does not report the immutable-graph capability (graphFlags 0x2)") !=
          std::string::npos);
    CHECK(c.reason.find("ZE_experimental_record_replay_graph is not advertised") !=
          std::string::npos);
  }
  SUBCASE("advertised but an entry point did not resolve") {
    lz::GraphSupport broken = ext;
    broken.ext_missing = {"zeGraphInstantiateExt", "zeCommandListAppendGraphExt"};
    c = lz::choose_capture_path(broken);
    CHECK(c.path == lz::CapturePath::CommandList);
    CHECK(c.reason.find("resolved no address for zeGraphInstantiateExt, "
                        "zeCommandListAppendGraphExt") != std::string::npos);
  }
  SUBCASE("forced by ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list") {
    lz::GraphSupport forced = ext;
    forced.forced_command_list = true;
    c = lz::choose_capture_path(forced);
    CHECK(c.path == lz::CapturePath::CommandList);
    CHECK(c.reason == "ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list");
  }
  CHECK(std::string(lz::to_string(lz::CapturePath::NativeGraph)) == "native graphs");
  CHECK(std::string(lz::to_string(lz::CapturePath::CommandList)) == "regular command lists");
}

TEST_CASE("ze_result_t -> name, meaning, accgraph code and message") {
  CHECK(lz::result_name(ZE_RESULT_SUCCESS) == "ZE_RESULT_SUCCESS");
  CHECK(lz::result_name(ZE_RESULT_ERROR_DEVICE_LOST) == "ZE_RESULT_ERROR_DEVICE_LOST");
  CHECK(lz::result_name(ZE_RESULT_ERROR_UNINITIALIZED) == "ZE_RESULT_ERROR_UNINITIALIZED");
  // The graph extension's codes, which the 1.4 header lacks.
  CHECK(lz::result_name(lz::kResultQueryFalse) == "ZE_RESULT_QUERY_FALSE");
  CHECK(lz::result_name(lz::kResultErrorInvalidGraphExp) == "ZE_RESULT_ERROR_INVALID_GRAPH_EXP");
  CHECK(lz::result_name(lz::kResultErrorCommandListNotCapturing) ==
        "ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING");
  CHECK(lz::result_name(static_cast<ze_result_t>(0x12345678)) == "ze_result_t 0x12345678");
  CHECK(lz::result_meaning(static_cast<ze_result_t>(0x12345678)).empty());
  CHECK(lz::result_meaning(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) == "out of device memory");

  CHECK(lz::error_code_for(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) == ErrorCode::Unsupported);
  CHECK(lz::error_code_for(lz::kResultErrorGraphCaptureUnsupported) == ErrorCode::Unsupported);
  CHECK(lz::error_code_for(ZE_RESULT_ERROR_UNINITIALIZED) == ErrorCode::Unavailable);
  CHECK(lz::error_code_for(ZE_RESULT_ERROR_DEVICE_LOST) == ErrorCode::BackendError);
  CHECK(lz::error_code_for(ZE_RESULT_ERROR_INVALID_ARGUMENT) == ErrorCode::BackendError);

  CHECK(
      lz::call_name("zeCommandListAppendMemoryCopy(list, dst, src, bytes, nullptr, 0, nullptr)") ==
      "zeCommandListAppendMemoryCopy");
  CHECK(lz::call_name("device.graph_api.begin_capture(core->list, &call)") == "begin_capture");
  CHECK(lz::call_name("::zeInit (0)") == "zeInit");

  accgraph::Error e = lz::make_error(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, "zeMemAllocDevice",
                                     "allocating 64 bytes of device memory on device 0");
  CHECK(e.code() == ErrorCode::BackendError);
  CHECK(e.backend() == "level_zero");
  CHECK(e.native_call() == "zeMemAllocDevice");
  CHECK(e.native_code() == "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY");
  CHECK(e.message() ==
        "allocating 64 bytes of device memory on device 0: zeMemAllocDevice failed with "
        "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (out of device memory)");
  CHECK(std::string(e.what()).find("level_zero") != std::string::npos);

  accgraph::Error odd =
      lz::make_error(static_cast<ze_result_t>(0x7abcdef0), "zeFoo", "doing x", "try y");
  CHECK(odd.message() == "doing x: zeFoo failed with ze_result_t 0x7abcdef0: try y");

  // The check macro names the call from the expression and builds the message on failure only.
  auto failing = [] { return ZE_RESULT_ERROR_INVALID_NULL_HANDLE; };
  try {
    ACCGRAPH_ZE_CHECK(failing(), "a test step");
    FAIL("ACCGRAPH_ZE_CHECK did not throw");
  } catch (const accgraph::Error& error) {
    CHECK(error.native_call() == "failing");
    CHECK(error.native_code() == "ZE_RESULT_ERROR_INVALID_NULL_HANDLE");
    CHECK(error.message() ==
          "a test step: failing failed with ZE_RESULT_ERROR_INVALID_NULL_HANDLE (invalid (null) "
          "handle)");
  }
  auto succeeding = [] { return ZE_RESULT_SUCCESS; };
  CHECK_NOTHROW(ACCGRAPH_ZE_CHECK(succeeding(), "never built"));
}
