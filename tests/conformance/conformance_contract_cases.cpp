// Conformance cases for the rules of backend.hpp not covered by the basic graph cases: stream
// order and wrapping, failures, fork/join, nested replay, serial launches, capture modes,
// lifetimes, capability gates and honest capabilities.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "conformance.hpp"

namespace accgraph::conformance {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBytes = 4096;

Buffer device_buffer(Stream& stream, size_t bytes = kBytes) {
  return Buffer::allocate(stream, bytes, MemoryKind::Device);
}

// --- Note [Streams] ----------------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("stream order: each copy sees the fill enqueued just before it",
                          "stream.order") {
  Stream stream = make_stream();
  Buffer source = device_buffer(stream);
  Buffer target = device_buffer(stream);
  fill_and_wait(stream, source, 0);
  fill_and_wait(stream, target, 0);
  // fill(source, i) then copy(target <- source), 32 times: in order, target ends as 32; any
  // reordering of a fill and the copy after it leaves an older value.
  for (uint8_t i = 1; i <= 32; ++i) {
    stream.fill(source, i);
    stream.copy(target, source);
  }
  CHECK(all_equal(read_back(stream, target), 32));
  if (capabilities().host_calls) {
    std::vector<int> order;
    for (int i = 0; i < 8; ++i) {
      stream.fill(source, static_cast<uint8_t>(i));
      stream.host_call([&order, i] { order.push_back(i); });
    }
    stream.synchronize();
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  }
}

ACCGRAPH_CONFORMANCE_CASE("wrap_stream: a wrapper of a live stream is the same queue",
                          "stream.wrap") {
  Stream stream = make_stream();
  Buffer source = device_buffer(stream);
  Buffer target = device_buffer(stream);
  fill_and_wait(stream, source, 0);
  fill_and_wait(stream, target, 0);
  {
    Stream wrapper = Stream::wrap(backend(), 0, stream.native_handle());
    CHECK(wrapper.native_handle() == stream.native_handle());
    stream.fill(source, 9);
    wrapper.copy(target, source);  // ordered after the fill: one queue
    CHECK(all_equal(read_back(wrapper, target), 9));
  }
  // The wrapper is gone; the queue is not.
  stream.fill(target, 4);
  CHECK(all_equal(read_back(stream, target), 4));
}

// --- Note [Failures] ---------------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("failures: a throwing host_call is reported by the next synchronize",
                          "failure.synchronize") {
  if (!capabilities().host_calls) {
    skip("lacks host_calls: no enqueued work that fails on demand");
    return;
  }
  Stream stream = make_stream();
  CHECK_NOTHROW(stream.host_call(
      [] { throw std::runtime_error("conformance: a deliberate host_call failure"); }));
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::BackendError,
                       "conformance: a deliberate host_call failure");
}

ACCGRAPH_CONFORMANCE_CASE("failures: reported once; later work still runs", "failure.once") {
  if (!capabilities().host_calls) {
    skip("lacks host_calls: no enqueued work that fails on demand");
    return;
  }
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);
  stream.host_call([] { throw std::runtime_error("conformance: fails once"); });
  stream.fill(data, 5);
  bool reported = false;
  try {
    stream.synchronize();
  } catch (const Error& e) {
    reported = std::string(e.what()).find("conformance: fails once") != std::string::npos;
  }
  {
    ACCGRAPH_RULE("failure.synchronize");
    CHECK(reported);
  }
  CHECK_NOTHROW(stream.synchronize());           // reported already
  CHECK(all_equal(read_back(stream, data), 5));  // the fill after the failure ran
  stream.fill(data, 6);
  CHECK(all_equal(read_back(stream, data), 6));  // and the stream is still usable
}

ACCGRAPH_CONFORMANCE_CASE(
    "failures: a failed node is reported on the replay stream; the other "
    "nodes run",
    "failure.replay") {
  if (!capabilities().host_calls) {
    skip("lacks host_calls: no graph node that fails on demand");
    return;
  }
  Stream capture = make_stream();
  Stream replay_stream = make_stream();
  Buffer before = device_buffer(capture);
  Buffer after = device_buffer(capture);
  fill_and_wait(capture, before, 0);
  fill_and_wait(capture, after, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(capture);
  capture.fill(before, 1);
  capture.host_call([] { throw std::runtime_error("conformance: a failing node"); });
  capture.fill(after, 2);
  graph.capture_end();
  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    graph.replay(replay_stream);
    CHECK_ACCGRAPH_ERROR(replay_stream.synchronize(), ErrorCode::BackendError,
                         "conformance: a failing node");
    CHECK(all_equal(read_back(replay_stream, before), 1));
    CHECK(all_equal(read_back(replay_stream, after), 2));  // the node after the failure ran
    fill_and_wait(replay_stream, before, 0);
    fill_and_wait(replay_stream, after, 0);
  }
  CHECK_NOTHROW(capture.synchronize());  // the capture stream ran none of it
}

struct LogCapture {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
  static void handler(LogLevel level, const char* message, void* self) {
    auto* capture = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(capture->mutex);
    capture->lines.emplace_back(level, message);
  }
};

ACCGRAPH_CONFORMANCE_CASE("failures: a stream destroyed with an unreported failure logs it",
                          "failure.destroyed") {
  if (!capabilities().host_calls) {
    skip("lacks host_calls: no enqueued work that fails on demand");
    return;
  }
  LogCapture capture;
  set_log_handler(&LogCapture::handler, &capture);
  {
    Stream stream = make_stream();
    stream.host_call([] { throw std::runtime_error("conformance: never synchronised"); });
  }  // destroyed without synchronize()
  set_log_handler(nullptr);
  bool logged = false;
  for (const auto& [level, line] : capture.lines)
    if ((level == LogLevel::Warning || level == LogLevel::Error) &&
        line.find("conformance: never synchronised") != std::string::npos)
      logged = true;
  CHECK_MESSAGE(logged, "no Warning or Error log line carried the failure's message ("
                            << capture.lines.size() << " lines were logged)");
}

// --- Note [Fork/join] --------------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("fork/join: an eager wait orders work across streams",
                          "fork-join.eager") {
  Stream waiter = make_stream();
  Stream waited = make_stream();
  Buffer source = device_buffer(waiter);
  Buffer target = device_buffer(waiter);
  for (int round = 1; round <= 4; ++round) {
    INFO("round " << round);
    fill_and_wait(waited, source, 0);
    fill_and_wait(waiter, target, 0);
    // The waited stream is busy first (where the backend can say so), so an unordered copy on
    // the waiter would run before the fill.
    enqueue_known_duration(waited, 20ms);
    waited.fill(source, static_cast<uint8_t>(round));
    waiter.wait(waited);
    waiter.copy(target, source);
    CHECK(all_equal(read_back(waiter, target), static_cast<uint8_t>(round)));
    waited.synchronize();
  }
}

ACCGRAPH_CONFORMANCE_CASE("fork/join: a stream waiting on a capturing one joins its capture",
                          "fork-join.fork") {
  if (!capabilities().multi_stream_capture) {
    skip("lacks multi_stream_capture");
    return;
  }
  Stream origin = make_stream();
  Stream forked = make_stream();
  Buffer data = device_buffer(origin);
  fill_and_wait(origin, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(origin);
  origin.fill(data, 1);
  CHECK_FALSE(forked.is_capturing());
  forked.wait(origin);  // fork
  CHECK(forked.is_capturing());
  CHECK(forked.capturing_graph() == &graph);
  forked.fill(data, 6);  // recorded, not run
  origin.wait(forked);   // join
  graph.capture_end();
  CHECK(all_equal(read_back(origin, data), 0));
  graph.replay();
  CHECK(all_equal(read_back(origin, data), 6));
}

ACCGRAPH_CONFORMANCE_CASE(
    "fork/join: forked streams leave capture mode at capture_end, at a "
    "failed capture_end, at reset and with the graph",
    "fork-join.leave") {
  if (!capabilities().multi_stream_capture) {
    skip("lacks multi_stream_capture");
    return;
  }
  Stream origin = make_stream();
  Stream forked = make_stream();
  Buffer data = device_buffer(origin);
  auto fork_into = [&](AcceleratorGraph& graph) {
    graph.capture_begin(origin);
    forked.wait(origin);
    forked.fill(data, 1);
    REQUIRE(forked.is_capturing());
  };
  auto check_eager_again = [&](const char* after) {
    INFO("after " << std::string(after));
    CHECK_FALSE(origin.is_capturing());
    CHECK_FALSE(forked.is_capturing());
    CHECK(forked.capturing_graph() == nullptr);
    fill_and_wait(forked, data, 7);  // runs now
    CHECK(all_equal(read_back(forked, data), 7));
  };
  {
    AcceleratorGraph graph(backend());
    fork_into(graph);
    origin.wait(forked);
    graph.capture_end();
    check_eager_again("capture_end");
  }
  {
    AcceleratorGraph graph(backend());
    fork_into(graph);  // never joined: capture_end fails
    CHECK_THROWS_AS(graph.capture_end(), Error);
    check_eager_again("a failed capture_end");
  }
  {
    AcceleratorGraph graph(backend());
    fork_into(graph);
    graph.reset();
    check_eager_again("reset");
  }
  {
    auto graph = std::make_unique<AcceleratorGraph>(backend());
    fork_into(*graph);
    graph.reset(nullptr);
    check_eager_again("destroying the graph");
  }
}

ACCGRAPH_CONFORMANCE_CASE("fork/join: the core refuses a capture waiting on eager work",
                          "fork-join.refused") {
  Stream capturing = make_stream();
  Stream eager = make_stream();
  Buffer data = device_buffer(capturing);
  fill_and_wait(capturing, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(capturing);
  capturing.fill(data, 3);
  CHECK_ACCGRAPH_ERROR(capturing.wait(eager), ErrorCode::InvalidState,
                       "a graph cannot wait for eager work");
  CHECK(capturing.is_capturing());  // the capture goes on, undisturbed
  CHECK_FALSE(eager.is_capturing());
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(capturing, data), 3));
}

ACCGRAPH_CONFORMANCE_CASE("fork/join: the core refuses a wait between two captures",
                          "fork-join.refused") {
  Stream first = make_stream();
  Stream second = make_stream();
  AcceleratorGraph a(backend());
  AcceleratorGraph b(backend());
  a.capture_begin(first);
  b.capture_begin(second);
  CHECK_ACCGRAPH_ERROR(second.wait(first), ErrorCode::InvalidState,
                       "one capture cannot depend on another");
  CHECK(first.capturing_graph() == &a);
  CHECK(second.capturing_graph() == &b);
  a.capture_end();
  b.capture_end();
}

// --- Note [Nested replay] ----------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("nested replay: replay on a capturing stream is recorded as one unit",
                          "replay.nested") {
  Stream inner_stream = make_stream();
  Stream outer_stream = make_stream();
  Buffer data = device_buffer(inner_stream);
  Buffer seen = device_buffer(inner_stream);
  fill_and_wait(inner_stream, data, 0);
  fill_and_wait(inner_stream, seen, 0);
  AcceleratorGraph inner(backend());
  inner.capture_begin(inner_stream);
  inner_stream.fill(data, 4);
  inner.capture_end();

  AcceleratorGraph outer(backend());
  outer.capture_begin(outer_stream);
  outer_stream.fill(data, 1);
  bool recorded = true;
  try {
    inner.replay(outer_stream);
  } catch (const Error& e) {
    // A backend that cannot nest says so, and records nothing.
    CHECK_MESSAGE(e.code() == ErrorCode::Unsupported, std::string(e.what()));
    recorded = false;
  }
  CHECK(outer_stream.is_capturing());
  outer_stream.copy(seen, data);  // after the nested replay: sees 4 when it was recorded
  outer.capture_end();
  CHECK(all_equal(read_back(inner_stream, data), 0));  // nothing ran at capture time
  outer.replay();
  CHECK(all_equal(read_back(outer_stream, data), recorded ? 4 : 1));
  CHECK(all_equal(read_back(outer_stream, seen), recorded ? 4 : 1));
  if (!recorded) MESSAGE(backend() << " refuses nested replays (Unsupported)");
}

// --- Note [Graph lifecycle] --------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("graph launches run one after another, alternating two streams",
                          "graph.serial") {
  // Each launch shifts the buffer one byte right and sets byte 0 to 1: after k launches exactly
  // the first k bytes are 1, unless two launches overlapped or ran out of order.
  constexpr size_t kLaunches = 200;
  Stream first = make_stream();
  Stream second = make_stream();
  Buffer counter = device_buffer(first, kLaunches + 1);
  Buffer scratch = device_buffer(first, kLaunches + 1);
  fill_and_wait(first, counter, 0);
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  AcceleratorGraph graph(backend());
  graph.capture_begin(first);
  if (capabilities().host_calls)
    first.host_call([&] {
      if (running.fetch_add(1) != 0) overlapped = true;
      std::this_thread::sleep_for(50us);
    });
  first.copy(scratch.data(), counter.data(), kLaunches);
  first.copy(counter.as<uint8_t>() + 1, scratch.data(), kLaunches);
  first.fill(counter.data(), 1, 1);
  if (capabilities().host_calls) first.host_call([&] { running.fetch_sub(1); });
  graph.capture_end();
  for (size_t i = 0; i < kLaunches; ++i) graph.replay(i % 2 == 0 ? first : second);
  second.synchronize();
  first.synchronize();
  CHECK_FALSE(overlapped);
  std::vector<uint8_t> bytes = read_back(first, counter);
  size_t ones = 0;
  while (ones < bytes.size() && bytes[ones] == 1) ++ones;
  CHECK(ones == kLaunches);
}

// --- Note [Capture modes] ----------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE(
    "capture modes: under ThreadLocal, other threads allocate and run "
    "eager work",
    "mode.thread-local") {
  if (!capabilities().supports(CaptureMode::ThreadLocal)) {
    skip("does not list CaptureMode::ThreadLocal");
    return;
  }
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream, {}, CaptureMode::ThreadLocal);
  stream.fill(data, 2);
  std::string failure;
  std::vector<uint8_t> other_bytes;
  std::thread other([&] {
    try {
      Stream own = Stream::create(backend());
      Buffer buffer = Buffer::allocate(own, kBytes, MemoryKind::Device);
      own.fill(buffer, 5);
      other_bytes = read_back(own, buffer);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  other.join();
  CHECK_MESSAGE(failure.empty(), "another thread's call failed during the capture: " << failure);
  CHECK(all_equal(other_bytes, 5));
  CHECK(stream.is_capturing());
  graph.capture_end();
  CHECK(all_equal(read_back(stream, data), 0));
  graph.replay();
  CHECK(all_equal(read_back(stream, data), 2));
}

ACCGRAPH_CONFORMANCE_CASE(
    "capture modes: under Relaxed, the capturing thread allocates and "
    "synchronises other streams",
    "mode.relaxed") {
  if (!capabilities().supports(CaptureMode::Relaxed)) {
    skip("does not list CaptureMode::Relaxed");
    return;
  }
  Stream stream = make_stream();
  Stream other = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream, {}, CaptureMode::Relaxed);
  stream.fill(data, 2);
  std::string failure;
  try {
    Buffer host = Buffer::allocate(other, kBytes, MemoryKind::Host);
    other.fill(host, 7);
    other.synchronize();
    CHECK(all_equal(std::vector<uint8_t>(host.as<uint8_t>(), host.as<uint8_t>() + kBytes), 7));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  CHECK_MESSAGE(failure.empty(), "a call of the capturing thread failed: " << failure);
  CHECK(stream.is_capturing());
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(stream, data), 2));
}

// --- Note [Lifetimes] --------------------------------------------------------------------------

ACCGRAPH_CONFORMANCE_CASE("lifetimes: one backend object per process", "life.backend") {
  Backend& first = Registry::instance().backend(backend());
  Backend& second = Registry::instance().backend(backend());
  CHECK(&first == &second);
  Stream stream = make_stream();
  CHECK(&stream.backend() == &first);
  AcceleratorGraph graph(backend());
  CHECK(&graph.backend() == &first);
}

ACCGRAPH_CONFORMANCE_CASE("lifetimes: a graph replays after its capture stream is destroyed",
                          "life.stream") {
  Stream other = make_stream();
  Buffer data = device_buffer(other);
  fill_and_wait(other, data, 0);
  AcceleratorGraph graph(backend());
  {
    Stream capture = make_stream();
    graph.capture_begin(capture);
    capture.fill(data, 9);
    graph.capture_end();
  }  // the capture stream is gone
  graph.replay(other);
  CHECK(all_equal(read_back(other, data), 9));
  {
    ACCGRAPH_RULE("core.order");
    CHECK_ACCGRAPH_ERROR(graph.replay(), ErrorCode::InvalidState, "has been destroyed");
  }
}

ACCGRAPH_CONFORMANCE_CASE("lifetimes: a replay enqueued just before reset or destruction runs",
                          "life.enqueued") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  for (const char* end : {"reset", "destruction"}) {
    INFO("the graph's " << std::string(end) << " right after replay()");
    fill_and_wait(stream, data, 0);
    auto graph = std::make_unique<AcceleratorGraph>(backend());
    graph->capture_begin(stream);
    enqueue_known_duration(stream, 10ms);  // still running when the graph goes
    stream.fill(data, 8);
    graph->capture_end();
    graph->replay();
    if (std::string(end) == "reset")
      graph->reset();
    else
      graph.reset(nullptr);
    CHECK(all_equal(read_back(stream, data), 8));
  }
}

// --- Note [Core preconditions]: capability gates and honest capabilities -----------------------

ACCGRAPH_CONFORMANCE_CASE(
    "capability gates: what capabilities() lacks is Unsupported from the "
    "core",
    "core.gates") {
  const Capabilities& caps = capabilities();
  if (caps.host_calls && caps.timed_delay && caps.multi_stream_capture && caps.pool_sharing) {
    skip(
        "claims host_calls, timed_delay, multi_stream_capture and pool_sharing: no gate to "
        "show");
    return;
  }
  Stream stream = make_stream();
  if (!caps.host_calls)
    CHECK_ACCGRAPH_ERROR(stream.host_call([] {}), ErrorCode::Unsupported,
                         "capabilities().host_calls");
  if (!caps.timed_delay)
    CHECK_ACCGRAPH_ERROR(stream.delay(1ms), ErrorCode::Unsupported, "capabilities().timed_delay");
  if (!caps.multi_stream_capture) {
    Stream other = make_stream();
    AcceleratorGraph graph(backend());
    graph.capture_begin(stream);
    CHECK_ACCGRAPH_ERROR(other.wait(stream), ErrorCode::Unsupported,
                         "capabilities().multi_stream_capture is false");
    CHECK_FALSE(other.is_capturing());
    graph.capture_end();
  }
  if (!caps.pool_sharing) {
    AcceleratorGraph first(backend());
    first.capture_begin(stream);
    first.capture_end();
    AcceleratorGraph second(backend());
    CHECK_ACCGRAPH_ERROR(second.capture_begin(stream, first.pool()), ErrorCode::Unsupported,
                         "capabilities().pool_sharing is false");
    CHECK(second.state() == GraphState::Empty);
    CHECK_FALSE(stream.is_capturing());
  }
}

ACCGRAPH_CONFORMANCE_CASE(
    "capabilities: host_call and delay do what they claim, eagerly and "
    "captured",
    "caps.honest") {
  const Capabilities& caps = capabilities();
  if (!caps.host_calls && !caps.timed_delay) {
    skip("claims neither host_calls nor timed_delay");
    return;
  }
  Stream stream = make_stream();
  if (caps.host_calls) {
    std::atomic<int> calls{0};
    stream.host_call([&] { ++calls; });
    stream.synchronize();
    CHECK(calls == 1);
    AcceleratorGraph graph(backend());
    graph.capture_begin(stream);
    stream.host_call([&] { ++calls; });
    graph.capture_end();
    CHECK(calls == 1);  // recorded, not run
    graph.replay();
    graph.replay();
    stream.synchronize();
    CHECK(calls == 3);  // once per replay
  }
  if (caps.timed_delay) {
    constexpr auto kDelay = 20ms;
    auto start = std::chrono::steady_clock::now();
    stream.delay(kDelay);
    stream.synchronize();
    auto took = std::chrono::steady_clock::now() - start;
    INFO("an eager delay of 20 ms took "
         << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us");
    CHECK(took >= kDelay);
    AcceleratorGraph graph(backend());
    graph.capture_begin(stream);
    stream.delay(kDelay);
    graph.capture_end();
    start = std::chrono::steady_clock::now();
    graph.replay();
    stream.synchronize();
    took = std::chrono::steady_clock::now() - start;
    INFO("a replayed delay of 20 ms took "
         << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us");
    CHECK(took >= kDelay);
  }
}

}  // namespace
}  // namespace accgraph::conformance
