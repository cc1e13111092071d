// Conformance cases for graphs and streams: replay, re-capture, capture modes, pools, fork/join,
// keep_graph and the illegal call orders (exact code and message).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "conformance.hpp"

namespace accgraph::conformance {
namespace {

constexpr size_t kBytes = 4096;

Buffer device_buffer(Stream& stream, size_t bytes = kBytes) {
  return Buffer::allocate(stream, bytes, MemoryKind::Device);
}

ACCGRAPH_CONFORMANCE_CASE("replay executes the recorded work, not the capture", "stream.capture") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);

  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.fill(data, 7);
  graph.capture_end();
  CHECK(graph.state() == GraphState::Instantiated);
  // Capturing recorded the fill without running it.
  CHECK(all_equal(read_back(stream, data), 0));

  graph.replay();
  CHECK(all_equal(read_back(stream, data), 7));

  // Each replay runs it again.
  fill_and_wait(stream, data, 1);
  graph.replay();
  CHECK(all_equal(read_back(stream, data), 7));
  CHECK(graph.replay_count() == 2);
}

ACCGRAPH_CONFORMANCE_CASE("1000 replays each run once, in order", "stream.order") {
  // Each replay shifts the buffer one byte right and sets byte 0 to 1, so after k replays
  // exactly the first k bytes are 1: a lost, repeated or reordered replay shows.
  constexpr size_t kReplays = 1000;
  Stream stream = make_stream();
  Buffer counter = device_buffer(stream, kReplays + 1);
  Buffer scratch = device_buffer(stream, kReplays + 1);
  fill_and_wait(stream, counter, 0);

  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.copy(scratch.data(), counter.data(), kReplays);
  stream.copy(counter.as<uint8_t>() + 1, scratch.data(), kReplays);
  stream.fill(counter.data(), 1, 1);
  graph.capture_end();

  for (size_t i = 0; i < kReplays; ++i) graph.replay();
  std::vector<uint8_t> bytes = read_back(stream, counter);
  size_t ones = 0;
  while (ones < bytes.size() && bytes[ones] == 1) ++ones;
  CHECK(ones == kReplays);
  CHECK(bytes[kReplays] == 0);
}

ACCGRAPH_CONFORMANCE_CASE("reset and re-capture records the new work", "graph.reset") {
  Stream stream = make_stream();
  Buffer first = device_buffer(stream);
  Buffer second = device_buffer(stream);
  fill_and_wait(stream, first, 0);
  fill_and_wait(stream, second, 0);

  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.fill(first, 1);
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(stream, first), 1));

  graph.reset();
  CHECK(graph.state() == GraphState::Empty);
  fill_and_wait(stream, first, 0);
  graph.capture_begin(stream);
  stream.fill(second, 2);
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(stream, second), 2));
  CHECK(all_equal(read_back(stream, first), 0));  // the old work is gone
}

ACCGRAPH_CONFORMANCE_CASE("replay on another stream of the same device", "life.stream") {
  Stream capture_stream = make_stream();
  Stream other = make_stream();
  Buffer data = device_buffer(capture_stream);
  fill_and_wait(capture_stream, data, 0);

  AcceleratorGraph graph(backend());
  graph.capture_begin(capture_stream);
  capture_stream.fill(data, 9);
  graph.capture_end();
  graph.replay(other);
  other.synchronize();
  CHECK(all_equal(read_back(other, data), 9));
}

ACCGRAPH_CONFORMANCE_CASE("capture modes: every listed mode captures and replays",
                          "mode.honoured") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  for (CaptureMode mode : {CaptureMode::Default, CaptureMode::Global, CaptureMode::ThreadLocal,
                           CaptureMode::Relaxed}) {
    if (!capabilities().supports(mode)) continue;
    INFO("capture mode " << std::string(to_string(mode)));
    fill_and_wait(stream, data, 0);
    AcceleratorGraph graph(backend());
    graph.capture_begin(stream, {}, mode);
    stream.fill(data, 3);
    graph.capture_end();
    graph.replay();
    CHECK(all_equal(read_back(stream, data), 3));
  }
}

ACCGRAPH_CONFORMANCE_CASE("capture modes: an unlisted mode is Unsupported from the core",
                          "core.gates") {
  std::vector<CaptureMode> unlisted;
  for (CaptureMode mode : {CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed})
    if (!capabilities().supports(mode)) unlisted.push_back(mode);
  if (unlisted.empty()) {
    skip("honours every capture mode, so the Unsupported error for a mode cannot be shown");
    return;
  }
  Stream stream = make_stream();
  for (CaptureMode mode : unlisted) {
    INFO("capture mode " << std::string(to_string(mode)));
    AcceleratorGraph graph(backend());
    CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream, {}, mode), ErrorCode::Unsupported,
                         "is not supported by backend");
    CHECK(graph.state() == GraphState::Empty);
    CHECK_FALSE(stream.is_capturing());
  }
}

ACCGRAPH_CONFORMANCE_CASE("pools: ids kept after reset, shared by PoolId, a bogus id refused",
                          "graph.pool") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  AcceleratorGraph first(backend());
  CHECK(first.pool().is_new_private());  // nothing captured yet
  first.capture_begin(stream);
  const PoolId pool = first.pool();
  CHECK_FALSE(pool.is_new_private());
  stream.fill(data, 1);
  first.capture_end();
  CHECK(first.pool() == pool);

  // The message names the pool it could not find, and the graph stays as it was (the core gate
  // comes first where pools are not shared: that is core.gates, not this rule).
  if (capabilities().pool_sharing) {
    AcceleratorGraph second(backend());
    second.capture_begin(stream, pool);
    stream.fill(data, 2);
    second.capture_end();
    CHECK(second.pool() == pool);
    second.replay();
    CHECK(all_equal(read_back(stream, data), 2));

    AcceleratorGraph third(backend());
    CHECK_ACCGRAPH_ERROR(third.capture_begin(stream, PoolId{987654321, 42}),
                         ErrorCode::InvalidArgument, "{987654321, 42}");
    CHECK(third.state() == GraphState::Empty);
    CHECK(third.pool().is_new_private());  // a capture_begin that threw changed nothing
    CHECK_FALSE(stream.is_capturing());
    third.capture_begin(stream);  // still usable
    third.capture_end();
  }

  // Kept after reset, and after a capture that failed at capture_end is reset too.
  first.reset();
  CHECK(first.pool() == pool);
  first.capture_begin(stream);
  const PoolId again = first.pool();
  CHECK_FALSE(again.is_new_private());
  first.reset();  // aborts the capture
  CHECK(first.pool() == again);
}

ACCGRAPH_CONFORMANCE_CASE("fork/join: work after a join runs after the joined stream's work",
                          "fork-join.join") {
  if (!capabilities().multi_stream_capture) {
    skip("lacks multi_stream_capture");
    return;
  }
  Stream origin = make_stream();
  Stream forked = make_stream();
  Buffer a = device_buffer(origin), b = device_buffer(origin), c = device_buffer(origin);
  for (Buffer* buffer : {&a, &b, &c}) fill_and_wait(origin, *buffer, 0);

  AcceleratorGraph graph(backend());
  graph.capture_begin(origin);
  origin.fill(a, 5);
  forked.wait(origin);  // fork: forked joins the capture after the fill
  CHECK(forked.is_capturing());
  CHECK(forked.capturing_graph() == &graph);
  forked.copy(b, a);
  origin.wait(forked);  // join
  origin.copy(c, b);
  graph.capture_end();
  {
    ACCGRAPH_RULE("fork-join.leave");
    CHECK_FALSE(forked.is_capturing());
  }
  CHECK(all_equal(read_back(origin, c), 0));

  graph.replay();
  CHECK(all_equal(read_back(origin, b), 5));
  CHECK(all_equal(read_back(origin, c), 5));
}

ACCGRAPH_CONFORMANCE_CASE("fork without join: capture_end fails, graph reset and reusable",
                          "fork-join.unjoined") {
  if (!capabilities().multi_stream_capture) {
    skip("lacks multi_stream_capture");
    return;
  }
  Stream origin = make_stream();
  Stream forked = make_stream();
  Buffer data = device_buffer(origin);
  AcceleratorGraph graph(backend());
  graph.capture_begin(origin);
  forked.wait(origin);
  forked.fill(data, 1);
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState, "origin.wait(forked)");
  CHECK(graph.state() == GraphState::Empty);
  {
    ACCGRAPH_RULE("fork-join.leave");
    CHECK_FALSE(origin.is_capturing());
    CHECK_FALSE(forked.is_capturing());
  }

  fill_and_wait(origin, data, 0);
  graph.capture_begin(origin);
  origin.fill(data, 4);
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(origin, data), 4));
}

ACCGRAPH_CONFORMANCE_CASE("keep_graph: explicit instantiate, or replay instantiates lazily",
                          "graph.keep-graph") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);

  AcceleratorGraph explicit_graph(backend(), GraphArgs{true});
  explicit_graph.capture_begin(stream);
  stream.fill(data, 6);
  explicit_graph.capture_end();
  CHECK(explicit_graph.state() == GraphState::Captured);
  explicit_graph.instantiate();
  CHECK(explicit_graph.state() == GraphState::Instantiated);
  explicit_graph.replay();
  CHECK(all_equal(read_back(stream, data), 6));

  AcceleratorGraph lazy(backend(), GraphArgs{true});
  lazy.capture_begin(stream);
  stream.fill(data, 8);
  lazy.capture_end();
  CHECK(lazy.state() == GraphState::Captured);
  lazy.replay();
  CHECK(lazy.state() == GraphState::Instantiated);
  CHECK(all_equal(read_back(stream, data), 8));
}

ACCGRAPH_CONFORMANCE_CASE("debug mode: debug_dump writes the captured operations",
                          "graph.debug-dump") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  AcceleratorGraph graph(backend());
  graph.enable_debug_mode();
  graph.capture_begin(stream);
  stream.fill(data, 1);
  stream.copy(data.data(), data.data(), 16);
  graph.capture_end();
  // The process id too: two runs of the suite at once in one directory (ctest -j runs the
  // level_zero suites side by side) would otherwise remove each other's dump.
  std::string path =
      fmt::format("accgraph-conformance-{}-{}-{}.dot", backend(), ::getpid(), graph.id());
  graph.debug_dump(path);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("the dump written to " << path);
  CHECK_FALSE(text.empty());
  std::remove(path.c_str());

  // A path that cannot be written is an error naming it, never a silent success.
  const std::string bad = "/nonexistent-accgraph-conformance-dir/graph.dot";
  try {
    graph.debug_dump(bad);
    FAIL_CHECK("debug_dump to '" << bad << "' (a missing directory) reported success");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(bad) != std::string::npos,
                  "the error does not name the path: " << e.what());
  }
  // The core refuses a dump once the graph was reset (nothing captured).
  {
    ACCGRAPH_RULE("core.order");
    graph.reset();
    CHECK_ACCGRAPH_ERROR(graph.debug_dump(path), ErrorCode::InvalidState,
                         "has no finished capture");
  }
}

// --- illegal call orders: the core's checks, identical on every backend ------------------------

ACCGRAPH_CONFORMANCE_CASE("illegal: capture_end without capture_begin", "core.order") {
  AcceleratorGraph graph(backend());
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState,
                       "is not capturing (empty): call capture_begin(stream) first");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: replay before capture", "core.order") {
  Stream stream = make_stream();
  AcceleratorGraph graph(backend());
  CHECK_ACCGRAPH_ERROR(graph.replay(), ErrorCode::InvalidState, "has nothing captured");
  CHECK_ACCGRAPH_ERROR(graph.replay(stream), ErrorCode::InvalidState, "has nothing captured");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: capture_begin twice", "core.order") {
  Stream stream = make_stream();
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream), ErrorCode::InvalidState,
                       "is already capturing: call capture_end() before capturing again");
  CHECK(graph.state() == GraphState::Capturing);  // the first capture goes on
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream), ErrorCode::InvalidState,
                       "already holds a capture (instantiated): call reset()");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: a second graph capturing on a stream that is capturing",
                          "core.order") {
  Stream stream = make_stream();
  AcceleratorGraph first(backend());
  AcceleratorGraph second(backend());
  first.capture_begin(stream);
  CHECK_ACCGRAPH_ERROR(second.capture_begin(stream), ErrorCode::InvalidState,
                       fmt::format("the stream is already capturing into graph {}", first.id()));
  CHECK(second.state() == GraphState::Empty);
  CHECK(stream.capturing_graph() == &first);
  first.capture_end();
}

ACCGRAPH_CONFORMANCE_CASE("illegal: synchronize while capturing", "core.order") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.fill(data, 1);
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::InvalidState,
                       "synchronize() is not allowed while the stream is capturing");
  CHECK(stream.is_capturing());  // refused, not ended
  graph.capture_end();
}

ACCGRAPH_CONFORMANCE_CASE("reset aborts a capture: nothing recorded runs, the graph captures anew",
                          "graph.reset") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.fill(data, 1);
  graph.reset();
  CHECK(graph.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  CHECK(all_equal(read_back(stream, data), 0));  // the aborted capture never ran

  graph.capture_begin(stream);
  stream.fill(data, 2);
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(stream, data), 2));
}

ACCGRAPH_CONFORMANCE_CASE("illegal: a stream of another backend", "core.arguments") {
  std::string other_backend;
  for (const BackendStatus& status : Registry::instance().status())
    if (status.available && status.name != backend()) other_backend = status.name;
  if (other_backend.empty()) {
    skip("no other backend is available to take a foreign stream from");
    return;
  }
  Stream foreign = Stream::create(other_backend);
  AcceleratorGraph graph(backend());
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(foreign), ErrorCode::InvalidArgument,
                       fmt::format("the stream belongs to backend '{}'", other_backend));
  CHECK(graph.state() == GraphState::Empty);

  Stream stream = make_stream();
  graph.capture_begin(stream);
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.replay(foreign), ErrorCode::InvalidArgument,
                       "replay on a stream of the capture device");
  CHECK_ACCGRAPH_ERROR(stream.wait(foreign), ErrorCode::InvalidArgument,
                       "streams can only wait for streams of the same backend");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: a device that does not exist, or another device's stream",
                          "core.arguments") {
  const size_t devices = backend_object().devices().size();
  CHECK_ACCGRAPH_ERROR(Stream::create(backend(), static_cast<int>(devices)),
                       ErrorCode::InvalidArgument,
                       fmt::format("device {} does not exist", devices));
  CHECK_ACCGRAPH_ERROR(Stream::create(backend(), -1), ErrorCode::InvalidArgument,
                       "device -1 does not exist");
  CHECK_ACCGRAPH_ERROR(Buffer::allocate(backend(), static_cast<int>(devices), 64),
                       ErrorCode::InvalidArgument, "does not exist");
  if (devices < 2) return;  // replay on another device's stream needs two
  Stream on_one = Stream::create(backend(), 1);
  Stream on_zero = make_stream();
  AcceleratorGraph graph(backend());
  graph.capture_begin(on_one);
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.replay(on_zero), ErrorCode::InvalidArgument,
                       "replay on a stream of the capture device");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: null pointers and zero sizes", "core.arguments") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  CHECK_ACCGRAPH_ERROR(stream.copy(nullptr, data.data(), 8), ErrorCode::InvalidArgument,
                       "null destination pointer");
  CHECK_ACCGRAPH_ERROR(stream.copy(data.data(), nullptr, 8), ErrorCode::InvalidArgument,
                       "null source pointer");
  CHECK_ACCGRAPH_ERROR(stream.fill(nullptr, 1, 8), ErrorCode::InvalidArgument, "null destination");
  CHECK_ACCGRAPH_ERROR(Buffer::allocate(stream, 0), ErrorCode::InvalidArgument, "0 bytes");
  CHECK_ACCGRAPH_ERROR(stream.host_call({}), ErrorCode::InvalidArgument, "empty function");
  CHECK_ACCGRAPH_ERROR(stream.delay(std::chrono::nanoseconds(-1)), ErrorCode::InvalidArgument,
                       "must not be negative");
  stream.copy(data.data(), data.data(), 0);  // zero bytes: nothing reaches the backend
  stream.fill(nullptr, 0, 0);
  stream.synchronize();
}

}  // namespace
}  // namespace accgraph::conformance
