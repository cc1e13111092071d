// Tests of the SPI helpers for backend authors in accgraph/spi/: stream_cast, check_device_index,
// HandleTable, FirstFailure, run_every_node, delay_on_this_thread (until 0.2 together in
// backend_support.hpp), steady_clock_markers.hpp, slot_ring_markers.hpp and native_call.hpp.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>  // doctest prints a shared_ptr with operator<< (backend_support.hpp brought it in)
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/first_failure.hpp"
#include "accgraph/spi/handle_table.hpp"
#include "accgraph/spi/host_delay.hpp"
#include "accgraph/spi/native_call.hpp"
#include "accgraph/spi/priority.hpp"
#include "accgraph/spi/run_every_node.hpp"
#include "accgraph/spi/slot_ring_markers.hpp"
#include "accgraph/spi/steady_clock_markers.hpp"
#include "accgraph/spi/stream_cast.hpp"
#include "check_error.hpp"

using accgraph::ErrorCode;

namespace {

// A stream of a made-up backend whose operations run at once on the calling thread.
class FakeStream final : public accgraph::StreamImpl {
 public:
  int device() const override { return 0; }
  void* native_handle() const override { return nullptr; }
  void copy(void*, const void*, size_t) override {}
  void fill(void*, uint8_t, size_t) override {}
  void wait_for(accgraph::StreamImpl&) override {}
  void synchronize() override {}
  bool is_capturing() const override { return false; }
};

class OtherStream final : public accgraph::StreamImpl {
 public:
  int device() const override { return 0; }
  void* native_handle() const override { return nullptr; }
  void copy(void*, const void*, size_t) override {}
  void fill(void*, uint8_t, size_t) override {}
  void wait_for(accgraph::StreamImpl&) override {}
  void synchronize() override {}
  bool is_capturing() const override { return false; }
};

}  // namespace

TEST_CASE("stream_cast: the backend's own stream, or InvalidArgument saying what to pass") {
  FakeStream fake;
  OtherStream other;
  CHECK(&accgraph::stream_cast<FakeStream>(fake, "fake", "replay") == &fake);
  CHECK_ACCGRAPH_ERROR(accgraph::stream_cast<FakeStream>(other, "fake", "replay"),
                       ErrorCode::InvalidArgument,
                       "replay: the stream does not belong to the fake backend: pass a stream "
                       "from Stream::create(\"fake\")");
}

TEST_CASE("check_device_index: the index, or InvalidArgument naming the devices there are") {
  CHECK(accgraph::check_device_index(1, 2, "fake", "capabilities") == 1);
  CHECK_ACCGRAPH_ERROR(accgraph::check_device_index(2, 2, "fake", "create_markers"),
                       ErrorCode::InvalidArgument,
                       "create_markers: device 2 does not exist: the fake backend has 2 "
                       "device(s), numbered from 0");
  CHECK_ACCGRAPH_ERROR(accgraph::check_device_index(-1, 1, "fake", "capabilities"),
                       ErrorCode::InvalidArgument, "device -1 does not exist");
}

TEST_CASE("HandleTable: live, expired (being destroyed) and unknown handles are told apart") {
  accgraph::HandleTable<int> table("fake");
  auto live = std::make_shared<int>(7);
  int unknown = 0;
  const void* expired_handle = nullptr;
  {
    auto gone = std::make_shared<int>(8);
    expired_handle = gone.get();
    table.insert(gone.get(), gone);
  }
  table.insert(live.get(), live);

  CHECK(table.find(live.get()).registered);
  CHECK(table.find(live.get()).object == live);
  CHECK_FALSE(table.find(&unknown).registered);
  CHECK(table.require_live(live.get()) == live);

  CHECK_ACCGRAPH_ERROR(table.require_live(nullptr), ErrorCode::InvalidArgument,
                       "wrap_stream: the native handle is null");
  CHECK_ACCGRAPH_ERROR(table.require_live(&unknown), ErrorCode::InvalidArgument,
                       "is not a live fake queue: pass the native_handle() of a fake stream "
                       "that still exists");

  table.erase(live.get());
  CHECK_FALSE(table.find(live.get()).registered);
  // The expired entry was dropped when a new one came in.
  CHECK_FALSE(table.find(expired_handle).registered);
}

TEST_CASE("FirstFailure: the first failure is thrown once, naming the operation and the queue") {
  accgraph::FirstFailure failures;
  failures.throw_if_any("fake", "fake stream 0x1");  // nothing recorded: returns
  failures.record("copy", "first");
  failures.record("fill", "second");
  CHECK_ACCGRAPH_ERROR(failures.throw_if_any("fake", "fake stream 0x1"), ErrorCode::BackendError,
                       "operation 'copy' on fake stream 0x1 failed: first (synchronize() "
                       "reports the first failure");
  failures.throw_if_any("fake", "fake stream 0x1");  // reported once: clean again

  // In a catch block: an OperationFailure is recorded under the inner operation it names.
  try {
    throw accgraph::OperationFailure("host_call (node 2 of a replay)", "broke");
  } catch (...) {
    failures.record_current_exception("replay");
  }
  CHECK_ACCGRAPH_ERROR(failures.throw_if_any("fake", "q"), ErrorCode::BackendError,
                       "operation 'host_call (node 2 of a replay)' on q failed: broke");
  try {
    throw 42;
  } catch (...) {
    failures.record_current_exception("host_call");
  }
  CHECK_ACCGRAPH_ERROR(failures.throw_if_any("fake", "q"), ErrorCode::BackendError,
                       "operation 'host_call' on q failed: an exception that is not a "
                       "std::exception");
}

TEST_CASE("run_every_node: every node runs after a failure; the first failure names its node") {
  std::vector<int> ran;
  const std::vector<std::string> names = {"copy", "host_call", "fill", "host_call"};
  try {
    accgraph::run_every_node(
        names.size(),
        [&](size_t i) {
          ran.push_back(static_cast<int>(i));
          if (i == 1) throw std::runtime_error("node broke");
          if (i == 3) throw std::runtime_error("later break");
        },
        [&](size_t i) -> const std::string& { return names[i]; }, "replay of fake graph");
    FAIL("run_every_node did not throw");
  } catch (const accgraph::OperationFailure& failure) {
    CHECK(failure.operation == "host_call (node 1 of a replay of fake graph)");
    CHECK(std::string(failure.what()) == "node broke");
  }
  CHECK(ran == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("run_every_node: a functor the caller names runs in place, not as a copy") {
  // A temporary trivially copyable functor may be run from a copy (no one can tell); one the
  // caller passes by name keeps what its calls change.
  struct Counting {
    size_t calls = 0;
    void operator()(size_t) { ++calls; }
  } counting;
  static_assert(std::is_trivially_copyable_v<Counting>);
  const std::string name = "node";
  accgraph::run_every_node(
      3, counting, [&](size_t) -> const std::string& { return name; }, "replay of fake graph");
  CHECK(counting.calls == 3);
  size_t through_capture = 0;
  accgraph::run_every_node(
      4, [calls = &through_capture](size_t) { ++*calls; },
      [&](size_t) -> const std::string& { return name; }, "replay of fake graph");
  CHECK(through_capture == 4);
}

TEST_CASE("delay_on_this_thread: at least the duration, and saturating for huge ones") {
  const auto start = std::chrono::steady_clock::now();
  accgraph::delay_on_this_thread(std::chrono::microseconds(500));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::microseconds(500));
  accgraph::delay_on_this_thread(std::chrono::nanoseconds(0));
}

namespace {

// Runs each marker operation at once (a synchronous "device").
accgraph::SteadyClockMarkers make_markers(size_t depth) {
  return accgraph::SteadyClockMarkers(
      "fake", "steady_clock", depth,
      [](accgraph::StreamImpl&, const char*, std::function<void()> op) { op(); });
}

}  // namespace

TEST_CASE("SteadyClockMarkers: sequences, ring slots and the read errors") {
  accgraph::SteadyClockMarkers markers = make_markers(2);
  FakeStream stream;
  CHECK(markers.strategy() == "steady_clock");
  CHECK(markers.ring_depth() == 2);
  CHECK(markers.resolution_ns() >= 1);
  uint64_t times[3] = {};

  CHECK_FALSE(markers.is_complete(0));
  CHECK_ACCGRAPH_ERROR(markers.read(0, times, 1), ErrorCode::InvalidState,
                       "read: marker sequence 0 has not finished: wait() for it");
  for (int sequence = 0; sequence < 3; ++sequence) {
    markers.begin_sequence(stream);
    markers.record(stream, 0);
    markers.record(stream, 1);
    markers.end_sequence(stream);
  }
  CHECK(markers.is_complete(2));
  markers.wait(2);
  markers.read(2, times, 2);
  CHECK(times[0] > 0);
  CHECK(times[1] >= times[0]);
  CHECK_ACCGRAPH_ERROR(markers.read(0, times, 2), ErrorCode::InvalidState,
                       "read: marker sequence 0 was overwritten by a later one (ring depth 2)");
  CHECK_ACCGRAPH_ERROR(markers.read(2, times, 3), ErrorCode::InvalidArgument,
                       "read: 3 markers asked for but this marker set recorded only 2: ask for "
                       "at most as many as were recorded");
}

namespace {

struct FakeCall {
  using Result = int;
  static constexpr const char* kBackend = "fake";
  static bool succeeded(int result) noexcept { return result == 0; }
  static std::string name(int result) { return "FAKE_ERROR_" + std::to_string(result); }
  static std::string meaning(int result) { return result == 2 ? "out of memory" : ""; }
  static std::string hint(int result) { return result == 2 ? "allocate less" : ""; }
  static ErrorCode error_code(int result) noexcept {
    return result == 3 ? ErrorCode::InvalidState : ErrorCode::BackendError;
  }
  static void on_failure(int) noexcept { ++failures; }
  static inline int failures = 0;
};

int fake_alloc(int result) { return result; }

}  // namespace

// A slot-ring marker set whose "device" is this test: a slot completes when the test says so,
// and its times are sequence * 10 + marker.
class FakeSlotRing final : public accgraph::SlotRingMarkers {
 public:
  FakeSlotRing() : SlotRingMarkers("fake", 2, 4) {}
  std::string strategy() const override { return "fake"; }
  uint64_t resolution_ns() const override { return 1; }

  bool done[2] = {false, false};
  int blocks = 0;
  int warnings = 0;
  bool ambiguous = false;
  uint64_t data[2][4] = {};

 protected:
  void check_stream(accgraph::StreamImpl&, const char*) override {}
  void record_marker(accgraph::StreamImpl&, uint32_t) override {}
  bool poll_slot(size_t index) override { return done[index]; }
  void block_on_slot(size_t index, const std::string&) override {
    ++blocks;
    done[index] = true;
  }
  void publish_slot(accgraph::StreamImpl&, uint64_t sequence, size_t index) override {
    done[index] = false;
    for (size_t k = 0; k < used(); ++k) data[index][k] = sequence * 10 + k;
  }
  bool window_is_unambiguous(uint64_t) const override { return !ambiguous; }
  void warn_unmeasurable(uint64_t, uint64_t) override { ++warnings; }
  void read_slot(size_t index, uint64_t* times, size_t count) override {
    for (size_t k = 0; k < count; ++k) times[k] = data[index][k];
  }
};

TEST_CASE("SlotRingMarkers: slots, the wait for a busy slot, the read errors, unmeasurable once") {
  FakeSlotRing m;
  FakeStream stream;
  uint64_t t[4] = {};
  CHECK(m.ring_depth() == 2);
  CHECK_FALSE(m.is_complete(0));
  CHECK_ACCGRAPH_ERROR(m.wait(0), ErrorCode::InvalidState, "was never launched");
  CHECK_ACCGRAPH_ERROR(m.record(stream, 4), ErrorCode::InvalidArgument, "beyond the 4 markers");

  m.begin_sequence(stream);
  m.record(stream, 0);
  m.record(stream, 2);
  m.after_eager_sequence(stream, 0);
  CHECK_FALSE(m.is_complete(0));  // published, not observed
  CHECK_FALSE(m.is_complete(1));  // not launched
  m.done[0] = true;
  CHECK(m.is_complete(0));
  m.read(0, t, 3);
  CHECK(t[0] == 0);
  CHECK(t[2] == 2);
  CHECK_ACCGRAPH_ERROR(m.read(0, t, 4), ErrorCode::InvalidArgument, "sequence 0 recorded 3");
  CHECK_ACCGRAPH_ERROR(m.read(0, t, 5), ErrorCode::InvalidArgument, "holds at most 4");

  m.begin_sequence(stream);
  m.record(stream, 0);
  m.after_eager_sequence(stream, 1);
  m.begin_sequence(stream);
  m.record(stream, 1);
  m.after_eager_sequence(stream, 2);  // slot 0 was read: no wait
  CHECK(m.blocks == 0);
  CHECK(m.is_complete(0));  // overwritten by sequence 2: complete, but no longer readable
  CHECK_ACCGRAPH_ERROR(m.read(0, t, 1), ErrorCode::InvalidState, "overwritten by sequence 2");
  m.begin_sequence(stream);
  m.after_eager_sequence(stream, 3);  // slot 1 still in flight: waited for first
  CHECK(m.blocks == 1);

  m.done[0] = true;
  m.ambiguous = true;  // the counter may have wrapped: every marker unmeasurable, one warning
  m.read(2, t, 2);
  CHECK(t[0] == accgraph::TimestampMarkers::kUnmeasurable);
  CHECK(t[1] == accgraph::TimestampMarkers::kUnmeasurable);
  CHECK(m.warnings == 1);
}

TEST_CASE("native_call_name: the called function from the call's source text") {
  CHECK(accgraph::native_call_name("cudaStreamEndCapture(stream_, &graph)") ==
        "cudaStreamEndCapture");
  CHECK(accgraph::native_call_name("device.graph_api.begin_capture(core->list, &call)") ==
        "begin_capture");
  CHECK(accgraph::native_call_name("::zeInit (0)") == "zeInit");
  CHECK(accgraph::native_call_name("err") == "err");
}

TEST_CASE("NativeCall: the message, code, call and result of a failed native call") {
  FakeCall::failures = 0;
  try {
    ACCGRAPH_NATIVE_CHECK(FakeCall, fake_alloc(2), "allocating 64 bytes");
    FAIL("ACCGRAPH_NATIVE_CHECK did not throw");
  } catch (const accgraph::Error& e) {
    CHECK(e.code() == ErrorCode::BackendError);
    CHECK(e.backend() == "fake");
    CHECK(e.native_call() == "fake_alloc");
    CHECK(e.native_code() == "FAKE_ERROR_2");
    CHECK(e.message() ==
          "allocating 64 bytes: fake_alloc failed with FAKE_ERROR_2 (out of memory): "
          "allocate less");
  }
  CHECK(FakeCall::failures == 1);
  CHECK_ACCGRAPH_ERROR(ACCGRAPH_NATIVE_CHECK(FakeCall, fake_alloc(3), "capture_end"),
                       ErrorCode::InvalidState, "capture_end: fake_alloc failed with FAKE_ERROR_3");
  CHECK(accgraph::NativeCall<FakeCall>::error(5, "fakeFoo", "doing x", "try y").message() ==
        "doing x: fakeFoo failed with FAKE_ERROR_5: try y");
  CHECK_NOTHROW(ACCGRAPH_NATIVE_CHECK(FakeCall, fake_alloc(0), "never built"));
  ACCGRAPH_NATIVE_LOG(FakeCall, fake_alloc(4), "destroying");  // logs, never throws
  CHECK(FakeCall::failures == 3);
}

TEST_CASE("priorities: host below level_zero and most plugins, below cuda") {
  static_assert(accgraph::priority::fallback < accgraph::priority::normal);
  static_assert(accgraph::priority::normal < accgraph::priority::preferred);
  CHECK(accgraph::priority::normal == 50);
}
