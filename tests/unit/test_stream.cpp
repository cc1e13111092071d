// Unit tests of stream.hpp on the host backend: Stream (asynchrony, order, waits, wrapping, errors)
// and Buffer.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <fmt/format.h>
#include <type_traits>
#include <utility>

#include "timing_seam.hpp"
#include "accgraph/accgraph.hpp"
#include "check_error.hpp"

using namespace accgraph;
using namespace std::chrono_literals;

namespace {

/// A host call that blocks the stream's worker until open() (shows asynchrony and order).
class Gate {
 public:
  std::function<void()> blocker() {
    return [future = promise_.get_future().share()] { future.wait(); };
  }
  void open() { promise_.set_value(); }

 private:
  std::promise<void> promise_;
};

}  // namespace

TEST_CASE("a host stream has the host backend's identity and capabilities") {
  Stream a = Stream::create("host");
  Stream b = Stream::create("host");
  CHECK(a.backend_name() == "host");
  CHECK(a.backend().name() == "host");
  CHECK(a.device() == 0);
  CHECK(a.id() != b.id());
  CHECK(a.native_handle() != nullptr);
  CHECK(a.native_handle() != b.native_handle());
  Capabilities caps = a.capabilities();
  CHECK(caps.supports(CaptureMode::Global));
  CHECK(caps.supports(CaptureMode::ThreadLocal));
  CHECK(caps.supports(CaptureMode::Relaxed));
  CHECK(caps.multi_stream_capture);
  CHECK(caps.host_calls);
  CHECK(caps.timed_delay);
  CHECK(caps.pool_sharing);
  CHECK_FALSE(caps.graph_update);
  REQUIRE(caps.marker_strategies.size() == 1);
  CHECK(caps.marker_strategies[0] == "steady_clock");
  CHECK(caps.marker_ring_depth == 64);
  CHECK(caps.timer_resolution_ns == 1);
  std::vector<DeviceInfo> devices = a.backend().devices();
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].index == 0);
  CHECK(devices[0].name == "host CPU");
}

TEST_CASE("enqueue returns before the work runs; synchronize waits for it") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 64, MemoryKind::Host);
  std::memset(data.data(), 0, 64);
  Gate gate;
  stream.host_call(gate.blocker());
  stream.fill(data, 5);
  std::this_thread::sleep_for(10ms);
  CHECK(data.as<uint8_t>()[0] == 0);  // still queued behind the gate
  gate.open();
  stream.synchronize();
  CHECK(data.as<uint8_t>()[63] == 5);
}

TEST_CASE("operations run in the order they were enqueued") {
  Stream stream = Stream::create("host");
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) stream.host_call([&order, i] { order.push_back(i); });
  stream.synchronize();
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[static_cast<size_t>(i)] == i);
  CHECK(detail::StreamAccess::operation_count(stream) == 100);
}

TEST_CASE("copy and fill, by pointer and by Buffer") {
  Stream stream = Stream::create("host");
  Buffer device = Buffer::allocate(stream, 256);
  Buffer host = Buffer::allocate(stream, 256, MemoryKind::Host);
  CHECK(device.kind() == MemoryKind::Device);
  CHECK(host.kind() == MemoryKind::Host);
  stream.fill(device, 0xab);
  stream.copy(host, device);
  stream.fill(host.as<uint8_t>() + 128, 1, 128);
  stream.synchronize();
  CHECK(host.as<uint8_t>()[0] == 0xab);
  CHECK(host.as<uint8_t>()[127] == 0xab);
  CHECK(host.as<uint8_t>()[128] == 1);
  CHECK(host.as<uint8_t>()[255] == 1);

  uint64_t before = detail::StreamAccess::operation_count(stream);
  stream.fill(nullptr, 0, 0);  // zero bytes: nothing to do, not even a null check
  stream.copy(nullptr, nullptr, 0);
  CHECK(detail::StreamAccess::operation_count(stream) == before);
}

TEST_CASE("copy/fill/host_call/delay misuse is reported with what to do") {
  Stream stream = Stream::create("host");
  Buffer small = Buffer::allocate(stream, 16);
  Buffer large = Buffer::allocate(stream, 32);
  CHECK_ACCGRAPH_ERROR(stream.copy(small, large), ErrorCode::InvalidArgument,
                       "the destination holds 16 bytes but the source 32");
  CHECK_ACCGRAPH_ERROR(stream.copy(nullptr, small.data(), 4), ErrorCode::InvalidArgument,
                       "copy of 4 bytes with a null destination pointer");
  CHECK_ACCGRAPH_ERROR(stream.copy(small.data(), nullptr, 4), ErrorCode::InvalidArgument,
                       "with a null source pointer");
  CHECK_ACCGRAPH_ERROR(stream.fill(nullptr, 1, 4), ErrorCode::InvalidArgument,
                       "fill of 4 bytes with a null destination");
  CHECK_ACCGRAPH_ERROR(stream.host_call(nullptr), ErrorCode::InvalidArgument,
                       "host_call with an empty function");
  CHECK_ACCGRAPH_ERROR(stream.delay(std::chrono::nanoseconds(-1)), ErrorCode::InvalidArgument,
                       "delay of -1 ns: the duration must not be negative");
  CHECK_ACCGRAPH_ERROR(stream.wait(stream), ErrorCode::InvalidArgument,
                       "a stream cannot wait for itself");
}

// audit 2026-11-25 #3: a byte count past a Buffer is refused, naming both sizes, before anything
// is written past the allocation (it was a heap overflow in the host worker).
TEST_CASE("copy/fill of a byte count past a Buffer is refused, naming both sizes") {
  Stream stream = Stream::create("host");
  Buffer a = Buffer::allocate(stream, 16, MemoryKind::Host);
  Buffer b = Buffer::allocate(stream, 16, MemoryKind::Host);
  Buffer big = Buffer::allocate(stream, 4096, MemoryKind::Host);
  uint64_t before = detail::StreamAccess::operation_count(stream);
  CHECK_ACCGRAPH_ERROR(stream.fill(a, 0x2a, 4096), ErrorCode::InvalidArgument,
                       "fill of 4096 bytes but the destination Buffer holds 16 bytes: pass "
                       "nbytes <= the Buffer's size");
  CHECK_ACCGRAPH_ERROR(stream.copy(a, b, 4096), ErrorCode::InvalidArgument,
                       "copy of 4096 bytes but the destination Buffer holds 16 bytes");
  CHECK_ACCGRAPH_ERROR(stream.copy(big, a, 4096), ErrorCode::InvalidArgument,
                       "copy of 4096 bytes but the source Buffer holds 16 bytes");
  CHECK_ACCGRAPH_ERROR(stream.copy(a, big.data(), 17), ErrorCode::InvalidArgument,
                       "copy of 17 bytes but the destination Buffer holds 16 bytes");
  CHECK_ACCGRAPH_ERROR(stream.copy(big.data(), a, 17), ErrorCode::InvalidArgument,
                       "copy of 17 bytes but the source Buffer holds 16 bytes");
  CHECK(detail::StreamAccess::operation_count(stream) == before);  // nothing was enqueued

  // Up to the size is fine, and only that prefix is touched.
  stream.fill(big, 0);
  stream.fill(a, 7, 16);
  stream.fill(b, 9, 8);
  stream.copy(big, a, 16);
  stream.copy(big.as<uint8_t>() + 16, b, 8);
  stream.copy(b, big.as<uint8_t>() + 100, 4);
  stream.synchronize();
  CHECK(big.as<uint8_t>()[15] == 7);
  CHECK(big.as<uint8_t>()[16] == 9);
  CHECK(big.as<uint8_t>()[24] == 0);
  CHECK(b.as<uint8_t>()[0] == 0);
  CHECK(b.as<uint8_t>()[4] == 9);
}

TEST_CASE("delay lasts at least its duration") {
  Stream stream = Stream::create("host");
  auto start = std::chrono::steady_clock::now();
  stream.delay(3ms);
  stream.synchronize();
  CHECK(std::chrono::steady_clock::now() - start >= 3ms);
}

TEST_CASE("an exception from a host call surfaces at synchronize, naming the operation") {
  Stream stream = Stream::create("host");
  std::atomic<bool> later_ran{false};
  stream.host_call([] { throw std::runtime_error("the callable broke"); });
  stream.host_call([&] { later_ran = true; });
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::BackendError,
                       "operation 'host_call' on host stream");
  try {
    stream.host_call([] { throw std::runtime_error("again"); });
    stream.synchronize();
  } catch (const Error& e) {
    CHECK(e.backend() == "host");
    CHECK(e.message().find("failed: again") != std::string::npos);
  }
  CHECK(later_ran);
  stream.synchronize();  // reported once: the stream is clean again
}

TEST_CASE("wait: a stream waits for the work enqueued on the other so far") {
  Stream first = Stream::create("host");
  Stream second = Stream::create("host");
  Gate gate;
  std::atomic<bool> after_wait{false};
  first.host_call(gate.blocker());
  second.wait(first);
  second.host_call([&] { after_wait = true; });
  std::this_thread::sleep_for(10ms);
  CHECK_FALSE(after_wait);
  gate.open();
  second.synchronize();
  CHECK(after_wait);

  // Work enqueued on `first` after the wait is not waited for.
  Gate later;
  first.host_call(later.blocker());
  second.wait(first);
  std::atomic<bool> ran{false};
  Gate blocked_after;
  first.host_call(blocked_after.blocker());
  later.open();
  second.host_call([&] { ran = true; });
  second.synchronize();
  CHECK(ran);
  blocked_after.open();
  first.synchronize();
}

TEST_CASE("wrap: a non-owning stream over another stream's native queue") {
  Stream owner = Stream::create("host");
  std::vector<int> order;
  {
    Stream wrapped = Stream::wrap("host", 0, owner.native_handle());
    CHECK(wrapped.native_handle() == owner.native_handle());
    CHECK(wrapped.id() != owner.id());
    owner.host_call([&] { order.push_back(1); });
    wrapped.host_call([&] { order.push_back(2); });  // same queue: in order with the owner's
    owner.host_call([&] { order.push_back(3); });
    wrapped.synchronize();
  }
  // Dropping the wrapper leaves the queue working.
  owner.host_call([&] { order.push_back(4); });
  owner.synchronize();
  CHECK(order == std::vector<int>{1, 2, 3, 4});

  CHECK_ACCGRAPH_ERROR(Stream::wrap("host", 0, nullptr), ErrorCode::InvalidArgument,
                       "wrap_stream: the native handle is null");
  int not_a_queue = 0;
  CHECK_ACCGRAPH_ERROR(Stream::wrap("host", 0, &not_a_queue), ErrorCode::InvalidArgument,
                       "is not a live host queue");
  void* gone = nullptr;
  {
    Stream temporary = Stream::create("host");
    gone = temporary.native_handle();
  }
  CHECK_ACCGRAPH_ERROR(Stream::wrap("host", 0, gone), ErrorCode::InvalidArgument,
                       "is not a live host queue");
}

TEST_CASE("a wrapped stream sees the capture of its queue") {
  Stream owner = Stream::create("host");
  Stream wrapped = Stream::wrap("host", 0, owner.native_handle());
  AcceleratorGraph graph("host");
  graph.capture_begin(owner);
  CHECK(wrapped.is_capturing());
  graph.capture_end();
  CHECK_FALSE(wrapped.is_capturing());
}

TEST_CASE("devices and backends that do not exist") {
  CHECK_ACCGRAPH_ERROR(Stream::create("host", 1), ErrorCode::InvalidArgument,
                       "device 1 does not exist: backend 'host' has 1 device(s)");
  CHECK_ACCGRAPH_ERROR(Stream::create("host", -1), ErrorCode::InvalidArgument,
                       "device -1 does not exist");
  CHECK_ACCGRAPH_ERROR(Stream::create("no_such_backend"), ErrorCode::InvalidArgument,
                       "no_such_backend");
  CHECK_ACCGRAPH_ERROR(Buffer::allocate("host", 1, 16), ErrorCode::InvalidArgument,
                       "device 1 does not exist");
}

TEST_CASE("a moved-from Stream is empty and says so") {
  Stream stream = Stream::create("host");
  Stream moved = std::move(stream);
  CHECK_FALSE(static_cast<bool>(stream));  // NOLINT(bugprone-use-after-move): the point
  CHECK(static_cast<bool>(moved));
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::InvalidState,
                       "this Stream is empty (moved from)");
  moved.synchronize();
}

TEST_CASE("synchronize while capturing is refused") {
  Stream stream = Stream::create("host");
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::InvalidState,
                       fmt::format("synchronize() is not allowed while the stream is capturing "
                                   "(graph {}): the captured work has not run",
                                   graph.id()));
  graph.reset();
  stream.synchronize();
}

TEST_CASE("Buffer: size, kind, alignment, moves and bad sizes") {
  Buffer buffer = Buffer::allocate("host", 0, 100, MemoryKind::Host);
  CHECK(buffer.size() == 100);
  CHECK(buffer.kind() == MemoryKind::Host);
  CHECK(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0);
  void* data = buffer.data();
  Buffer moved = std::move(buffer);
  CHECK(moved.data() == data);
  CHECK(buffer.data() == nullptr);  // NOLINT(bugprone-use-after-move)
  CHECK(buffer.size() == 0);
  CHECK_ACCGRAPH_ERROR(Buffer::allocate("host", 0, 0), ErrorCode::InvalidArgument,
                       "Buffer::allocate of 0 bytes");
  Stream stream = Stream::create("host");
  Buffer from_stream = Buffer::allocate(stream, 8);
  CHECK(from_stream.kind() == MemoryKind::Device);
  CHECK(reinterpret_cast<uintptr_t>(from_stream.data()) % 64 == 0);
}

TEST_CASE("destroying a stream runs the work already enqueued") {
  std::atomic<int> ran{0};
  {
    Stream stream = Stream::create("host");
    stream.delay(2ms);
    for (int i = 0; i < 10; ++i) stream.host_call([&] { ++ran; });
  }
  CHECK(ran == 10);
}

// Issue 9 item 5: the public Stream and AcceleratorGraph expose no way around the core's state
// checks and hooks (a user calling impl().replay() would skip both).
namespace {
template <class T, class = void>
struct has_impl : std::false_type {};
template <class T>
struct has_impl<T, std::void_t<decltype(std::declval<T&>().impl())>> : std::true_type {};
template <class T, class = void>
struct has_state : std::false_type {};
template <class T>
struct has_state<T, std::void_t<decltype(std::declval<T&>().state())>> : std::true_type {};
template <class T, class = void>
struct has_operation_count : std::false_type {};
template <class T>
struct has_operation_count<T, std::void_t<decltype(std::declval<T&>().operation_count())>>
    : std::true_type {};
}  // namespace

// Checked when this file compiles:
static_assert(!has_impl<accgraph::Stream>::value, "Stream::impl() must not be public");
static_assert(!has_state<accgraph::Stream>::value, "Stream::state() must not be public");
static_assert(!has_operation_count<accgraph::Stream>::value,
              "Stream::operation_count() must not be public");
static_assert(!has_impl<accgraph::AcceleratorGraph>::value,
              "AcceleratorGraph::impl() must not be public");
static_assert(has_state<accgraph::AcceleratorGraph>::value,  // GraphState: public, harmless
              "the check itself must see public members");
