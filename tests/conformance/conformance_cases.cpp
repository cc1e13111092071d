// Conformance cases for graphs and streams: replay, re-capture, capture modes, pools, fork/join,
// keep_graph and the illegal call orders (exact code and message).
#include <cstdio>
#include <fstream>
#include <iterator>

#include "conformance.hpp"

namespace accgraph::conformance {
namespace {

constexpr size_t kBytes = 4096;

Buffer device_buffer(Stream& stream, size_t bytes = kBytes) {
  return Buffer::allocate(stream, bytes, MemoryKind::Device);
}

void fill_and_wait(Stream& stream, Buffer& buffer, uint8_t value) {
  stream.fill(buffer, value);
  stream.synchronize();
}

ACCGRAPH_CONFORMANCE_CASE("replay executes the recorded work, not the capture") {
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

ACCGRAPH_CONFORMANCE_CASE("1000 replays each run once, in order") {
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

ACCGRAPH_CONFORMANCE_CASE("reset and re-capture records the new work") {
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

ACCGRAPH_CONFORMANCE_CASE("replay on another stream of the same device") {
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

ACCGRAPH_CONFORMANCE_CASE("capture modes: honoured ones work, others are Unsupported") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  bool all_honoured = true;
  for (CaptureMode mode : {CaptureMode::Default, CaptureMode::Global, CaptureMode::ThreadLocal,
                           CaptureMode::Relaxed}) {
    CAPTURE(to_string(mode));
    AcceleratorGraph graph(backend());
    if (!capabilities().supports(mode)) {
      all_honoured = false;
      CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream, {}, mode), ErrorCode::Unsupported,
                           "is not supported by backend");
      CHECK(graph.state() == GraphState::Empty);
      CHECK_FALSE(stream.is_capturing());
      continue;
    }
    fill_and_wait(stream, data, 0);
    graph.capture_begin(stream, {}, mode);
    stream.fill(data, 3);
    graph.capture_end();
    graph.replay();
    CHECK(all_equal(read_back(stream, data), 3));
  }
  if (all_honoured)
    skip("honours every capture mode, so the Unsupported error for a mode cannot be shown");
}

ACCGRAPH_CONFORMANCE_CASE("pools: a second graph shares the first's pool; a bogus id is refused") {
  if (!capabilities().pool_sharing) {
    skip("lacks pool_sharing");
    return;
  }
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  AcceleratorGraph first(backend());
  first.capture_begin(stream);
  stream.fill(data, 1);
  first.capture_end();
  PoolId pool = first.pool();
  CHECK_FALSE(pool.is_new_private());

  AcceleratorGraph second(backend());
  second.capture_begin(stream, pool);
  stream.fill(data, 2);
  second.capture_end();
  CHECK(second.pool() == pool);
  second.replay();
  CHECK(all_equal(read_back(stream, data), 2));

  // The message names the pool it could not find.
  AcceleratorGraph third(backend());
  CHECK_ACCGRAPH_ERROR(third.capture_begin(stream, PoolId{987654321, 42}),
                       ErrorCode::InvalidArgument, "{987654321, 42}");
  CHECK(third.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  third.capture_begin(stream);  // still usable
  third.capture_end();
}

ACCGRAPH_CONFORMANCE_CASE("fork/join capture orders work across streams") {
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
  CHECK_FALSE(forked.is_capturing());
  CHECK(all_equal(read_back(origin, c), 0));

  graph.replay();
  CHECK(all_equal(read_back(origin, b), 5));
  CHECK(all_equal(read_back(origin, c), 5));
}

ACCGRAPH_CONFORMANCE_CASE("fork without join: capture_end fails, graph reset and reusable") {
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
  CHECK_FALSE(origin.is_capturing());
  CHECK_FALSE(forked.is_capturing());

  fill_and_wait(origin, data, 0);
  graph.capture_begin(origin);
  origin.fill(data, 4);
  graph.capture_end();
  graph.replay();
  CHECK(all_equal(read_back(origin, data), 4));
}

ACCGRAPH_CONFORMANCE_CASE("keep_graph: explicit instantiate, or replay instantiates lazily") {
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

ACCGRAPH_CONFORMANCE_CASE("debug mode writes a dump of the captured graph") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  AcceleratorGraph graph(backend());
  graph.enable_debug_mode();
  graph.capture_begin(stream);
  stream.fill(data, 1);
  graph.capture_end();
  std::string path = fmt::format("accgraph-conformance-{}-{}.dot", backend(), graph.id());
  graph.debug_dump(path);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(!text.empty());
  std::remove(path.c_str());
}

// --- illegal call orders: the core's checks, identical on every backend ------------------------

ACCGRAPH_CONFORMANCE_CASE("illegal: capture_end without capture_begin") {
  AcceleratorGraph graph(backend());
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState,
                       "is not capturing (empty): call capture_begin(stream) first");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: replay before capture") {
  Stream stream = make_stream();
  AcceleratorGraph graph(backend());
  CHECK_ACCGRAPH_ERROR(graph.replay(), ErrorCode::InvalidState, "has nothing captured");
  CHECK_ACCGRAPH_ERROR(graph.replay(stream), ErrorCode::InvalidState, "has nothing captured");
}

ACCGRAPH_CONFORMANCE_CASE("illegal: capture_begin twice") {
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

ACCGRAPH_CONFORMANCE_CASE("illegal: a second graph capturing on a stream that is capturing") {
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

ACCGRAPH_CONFORMANCE_CASE("illegal: synchronize while capturing; reset makes the graph usable") {
  Stream stream = make_stream();
  Buffer data = device_buffer(stream);
  fill_and_wait(stream, data, 0);
  AcceleratorGraph graph(backend());
  graph.capture_begin(stream);
  stream.fill(data, 1);
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::InvalidState,
                       "synchronize() is not allowed while the stream is capturing");
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

ACCGRAPH_CONFORMANCE_CASE("illegal: a stream of another backend or device") {
  std::string other_backend;
  for (const BackendStatus& status : Registry::instance().status())
    if (status.available && status.name != backend()) other_backend = status.name;
  if (other_backend.empty()) {
    skip("no other backend is available to take a foreign stream from");
  } else {
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
  }

  size_t devices = Registry::instance().backend(backend()).devices().size();
  if (devices < 2) {
    CHECK_ACCGRAPH_ERROR(Stream::create(backend(), static_cast<int>(devices)),
                         ErrorCode::InvalidArgument,
                         fmt::format("device {} does not exist", devices));
    skip("has one device, so replay on another device's stream cannot be shown");
    return;
  }
  Stream on_one = Stream::create(backend(), 1);
  Stream on_zero = make_stream();
  AcceleratorGraph graph(backend());
  graph.capture_begin(on_one);
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.replay(on_zero), ErrorCode::InvalidArgument,
                       "replay on a stream of the capture device");
}

}  // namespace
}  // namespace accgraph::conformance
