// Unit tests of graph.hpp on the host backend: AcceleratorGraph states and misuse errors,
// current(), CaptureGuard, pools, fork/join, replay order, debug dumps and stats.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "check_error.hpp"
#include "host_alias_backend.hpp"

using namespace accgraph;

namespace {

// "host_twin": a second backend name over the host backend's objects.
void register_twin() { test::register_host_alias("host_twin", "test_graph.cpp"); }

std::vector<uint8_t> read_back(Stream& stream, const Buffer& buffer) {
  std::vector<uint8_t> bytes(buffer.size());
  stream.copy(bytes.data(), buffer.data(), buffer.size());
  stream.synchronize();
  return bytes;
}

// A file name of this process's own: two copies of this test run at once in one build tree
// (ctest --repeat under load) would otherwise remove each other's dumps.
std::string own_path(const std::string& stem, uint64_t graph_id) {
  return fmt::format("{}_{}_{}.dot", stem, ::getpid(), graph_id);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("states: empty, capturing, instantiated; keep_graph stops at captured") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 64);
  AcceleratorGraph graph("host");
  CHECK(graph.backend_name() == "host");
  CHECK(graph.state() == GraphState::Empty);
  CHECK(graph.device() == -1);
  CHECK(graph.capture_stream_id() == 0);
  graph.capture_begin(stream);
  CHECK(graph.state() == GraphState::Capturing);
  CHECK(stream.is_capturing());
  CHECK(stream.capturing_graph() == &graph);
  stream.fill(data, 1);
  graph.capture_end();
  CHECK(graph.state() == GraphState::Instantiated);
  CHECK(graph.device() == 0);
  CHECK(graph.capture_stream_id() == stream.id());
  CHECK_FALSE(stream.is_capturing());
  CHECK(stream.capturing_graph() == nullptr);
  CHECK(graph.stats().nodes == 1);
  CHECK(graph.stats().instantiations == 1);

  AcceleratorGraph kept("host", GraphArgs{true});
  CHECK(kept.args().keep_graph);
  kept.capture_begin(stream);
  kept.capture_end();
  CHECK(kept.state() == GraphState::Captured);
  CHECK(kept.stats().instantiations == 0);
  kept.instantiate();
  CHECK(kept.state() == GraphState::Instantiated);

  AcceleratorGraph other("host");
  CHECK(other.id() != graph.id());
}

TEST_CASE("every call-order misuse has its code and message") {
  Stream stream = Stream::create("host");
  AcceleratorGraph graph("host");
  const uint64_t id = graph.id();
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState,
                       fmt::format("capture_end: graph {} is not capturing (empty): call "
                                   "capture_begin(stream) first",
                                   id));
  CHECK_ACCGRAPH_ERROR(graph.replay(), ErrorCode::InvalidState,
                       fmt::format("replay: graph {} has nothing captured", id));
  CHECK_ACCGRAPH_ERROR(graph.replay(stream), ErrorCode::InvalidState,
                       fmt::format("replay: graph {} has nothing captured", id));
  CHECK_ACCGRAPH_ERROR(graph.instantiate(), ErrorCode::InvalidState,
                       fmt::format("instantiate: graph {} has no finished capture (empty)", id));
  CHECK_ACCGRAPH_ERROR(graph.debug_dump("x.dot"), ErrorCode::InvalidState, "debug_dump: graph");

  graph.capture_begin(stream);
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream), ErrorCode::InvalidState,
                       fmt::format("capture_begin: graph {} is already capturing: call "
                                   "capture_end() before capturing again",
                                   id));
  CHECK_ACCGRAPH_ERROR(graph.replay(stream), ErrorCode::InvalidState,
                       fmt::format("replay: graph {} is still capturing: call capture_end() "
                                   "first",
                                   id));
  AcceleratorGraph second("host");
  CHECK_ACCGRAPH_ERROR(second.capture_begin(stream), ErrorCode::InvalidState,
                       fmt::format("capture_begin: the stream is already capturing into graph "
                                   "{}: end that capture first or capture on another stream",
                                   id));
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(stream), ErrorCode::InvalidState,
                       fmt::format("capture_begin: graph {} already holds a capture "
                                   "(instantiated): call reset() before capturing again",
                                   id));
  CHECK_ACCGRAPH_ERROR(graph.instantiate(), ErrorCode::InvalidState,
                       fmt::format("instantiate: graph {} is already instantiated", id));
  CHECK_ACCGRAPH_ERROR(graph.debug_dump(""), ErrorCode::InvalidArgument,
                       "debug_dump: the path is empty");
}

TEST_CASE("streams of another backend are refused at capture and replay") {
  register_twin();
  Stream twin = Stream::create("host_twin");
  Stream stream = Stream::create("host");
  AcceleratorGraph graph("host");
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(twin), ErrorCode::InvalidArgument,
                       fmt::format("capture_begin: the stream belongs to backend 'host_twin' but "
                                   "graph {} is a 'host' graph: create the stream with "
                                   "Stream::create(\"host\")",
                                   graph.id()));
  CHECK(graph.state() == GraphState::Empty);
  graph.capture_begin(stream);
  graph.capture_end();
  CHECK_ACCGRAPH_ERROR(graph.replay(twin), ErrorCode::InvalidArgument,
                       fmt::format("replay: graph {} was captured on host device 0 but the "
                                   "stream is on host_twin device 0",
                                   graph.id()));
  CHECK_ACCGRAPH_ERROR(stream.wait(twin), ErrorCode::InvalidArgument,
                       "this stream belongs to backend 'host' and the other to 'host_twin'");
}

TEST_CASE("current() is the graph capturing on this thread, restored after nesting") {
  CHECK(AcceleratorGraph::current() == nullptr);
  Stream first_stream = Stream::create("host");
  Stream second_stream = Stream::create("host");
  AcceleratorGraph outer("host");
  AcceleratorGraph inner("host");
  outer.capture_begin(first_stream);
  CHECK(AcceleratorGraph::current() == &outer);
  inner.capture_begin(second_stream);
  CHECK(AcceleratorGraph::current() == &inner);
  AcceleratorGraph* seen_elsewhere = &outer;
  std::thread([&] { seen_elsewhere = AcceleratorGraph::current(); }).join();
  CHECK(seen_elsewhere == nullptr);  // per thread
  inner.capture_end();
  CHECK(AcceleratorGraph::current() == &outer);
  outer.capture_end();
  CHECK(AcceleratorGraph::current() == nullptr);
}

// Audit 2.15: capture_end on another thread used to leave current() pointing at the graph on
// the capturing thread, also after the graph was destroyed.
TEST_CASE("current() forgets a capture ended or destroyed on another thread") {
  Stream stream = Stream::create("host");
  {
    AcceleratorGraph graph("host");
    graph.capture_begin(stream);
    CHECK(AcceleratorGraph::current() == &graph);
    std::thread([&] { graph.capture_end(); }).join();
    CHECK(AcceleratorGraph::current() == nullptr);
    graph.replay();
    stream.synchronize();
  }
  CHECK(AcceleratorGraph::current() == nullptr);

  // A graph that began capturing elsewhere is not current here, and its destruction on this
  // thread removes it there.
  std::unique_ptr<AcceleratorGraph> elsewhere = std::make_unique<AcceleratorGraph>("host");
  std::thread([&] { elsewhere->capture_begin(stream); }).join();
  CHECK(AcceleratorGraph::current() == nullptr);
  elsewhere.reset();
  CHECK_FALSE(stream.is_capturing());

  // A later capture on this thread does not bring a stale graph back when it ends.
  AcceleratorGraph later("host");
  later.capture_begin(stream);
  CHECK(AcceleratorGraph::current() == &later);
  later.capture_end();
  CHECK(AcceleratorGraph::current() == nullptr);
}

// Audit 2.11-2.13: the graph kept a raw pointer to the Stream object it was captured on.
TEST_CASE("the capture stream: moved, kept in a reallocating vector, or destroyed") {
  SUBCASE("streams in a std::vector that reallocates after the capture") {
    std::vector<Stream> streams;
    streams.push_back(Stream::create("host"));
    Buffer data = Buffer::allocate(streams[0], 64);
    streams[0].fill(data, 0);
    AcceleratorGraph graph("host");
    graph.capture_begin(streams[0]);
    streams[0].fill(data, 7);
    graph.capture_end();
    for (int i = 0; i < 16; ++i) streams.push_back(Stream::create("host"));
    graph.replay();
    CHECK(read_back(streams[0], data)[0] == 7);
  }
  SUBCASE("a Stream moved during the capture") {
    Stream stream = Stream::create("host");
    Buffer data = Buffer::allocate(stream, 64);
    stream.fill(data, 0);
    AcceleratorGraph graph("host");
    graph.capture_begin(stream);
    stream.fill(data, 5);
    Stream moved = std::move(stream);
    CHECK(moved.is_capturing());
    graph.capture_end();
    CHECK(graph.capture_stream_id() == moved.id());
    graph.replay();
    CHECK(read_back(moved, data)[0] == 5);
  }
  SUBCASE("the capture stream destroyed after the capture: replay() says so, replay(s) works") {
    AcceleratorGraph graph("host");
    Stream other = Stream::create("host");
    Buffer data = Buffer::allocate(other, 64);
    other.fill(data, 0);
    uint64_t gone_id = 0;
    {
      Stream stream = Stream::create("host");
      gone_id = stream.id();
      graph.capture_begin(stream);
      stream.fill(data, 4);
      graph.capture_end();
    }
    CHECK_ACCGRAPH_ERROR(graph.replay(), ErrorCode::InvalidState,
                         fmt::format("stream {}, on which graph {} was captured, has been "
                                     "destroyed: pass a stream",
                                     gone_id, graph.id()));
    graph.replay(other);
    CHECK(read_back(other, data)[0] == 4);
  }
  SUBCASE("the capture stream destroyed during the capture aborts it") {
    AcceleratorGraph graph("host");
    uint64_t gone_id = 0;
    {
      Stream stream = Stream::create("host");
      gone_id = stream.id();
      graph.capture_begin(stream);
    }
    CHECK(graph.state() == GraphState::Empty);
    CHECK(AcceleratorGraph::current() == nullptr);
    CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState,
                         fmt::format("stream {}, on which the capture began, was destroyed "
                                     "before capture_end",
                                     gone_id));
    Stream again = Stream::create("host");
    graph.capture_begin(again);  // reusable
    graph.capture_end();
    graph.replay();
    again.synchronize();
  }
}

TEST_CASE("CaptureGuard ends the capture at scope exit, aborts it on an exception") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 64);
  stream.fill(data, 0);
  AcceleratorGraph graph("host");
  {
    CaptureGuard capture(graph, stream);
    CHECK(AcceleratorGraph::current() == &graph);
    stream.fill(data, 3);
  }
  CHECK(graph.state() == GraphState::Instantiated);
  graph.replay();
  CHECK(read_back(stream, data)[0] == 3);

  AcceleratorGraph aborted("host");
  try {
    CaptureGuard capture(aborted, stream);
    stream.fill(data, 9);
    throw std::runtime_error("leave the scope");
  } catch (const std::runtime_error&) {
  }
  CHECK(aborted.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  CHECK(AcceleratorGraph::current() == nullptr);
  CHECK(read_back(stream, data)[0] == 3);

  // finish() reports a failing capture_end as an exception.
  Stream forked = Stream::create("host");
  AcceleratorGraph unjoined("host");
  {
    CaptureGuard capture(unjoined, stream);
    forked.wait(stream);
    forked.fill(data, 1);
    CHECK_ACCGRAPH_ERROR(capture.finish(), ErrorCode::InvalidState, "unjoined work");
  }
  CHECK(unjoined.state() == GraphState::Empty);
}

TEST_CASE("reset aborts a capture and drops a finished one; the graph captures again") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 64);
  stream.fill(data, 0);
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  stream.fill(data, 1);
  graph.reset();
  CHECK(graph.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  CHECK(read_back(stream, data)[0] == 0);

  graph.capture_begin(stream);
  stream.fill(data, 2);
  graph.capture_end();
  graph.replay();
  graph.reset();
  CHECK(graph.replay_count() == 0);
  CHECK(graph.stats().nodes == 0);
  CHECK(read_back(stream, data)[0] == 2);
  graph.reset();  // resetting an empty graph is fine
}

TEST_CASE("destroying a graph mid-capture leaves the stream usable") {
  Stream stream = Stream::create("host");
  {
    AcceleratorGraph graph("host");
    graph.capture_begin(stream);
  }
  CHECK_FALSE(stream.is_capturing());
  CHECK(AcceleratorGraph::current() == nullptr);
  stream.synchronize();
}

TEST_CASE("pools: private by default, shared by PoolId, refused when unknown or dead") {
  Stream stream = Stream::create("host");
  AcceleratorGraph first("host");
  first.capture_begin(stream);
  first.capture_end();
  PoolId pool = first.pool();
  CHECK_FALSE(pool.is_new_private());

  AcceleratorGraph second("host");
  second.capture_begin(stream, pool);
  second.capture_end();
  CHECK(second.pool() == pool);

  AcceleratorGraph third("host");
  third.capture_begin(stream);
  third.capture_end();
  CHECK(third.pool() != pool);

  AcceleratorGraph bogus("host");
  CHECK_ACCGRAPH_ERROR(bogus.capture_begin(stream, PoolId{12345, 6}), ErrorCode::InvalidArgument,
                       "capture_begin: no live graph pool has id {12345, 6}: pass the pool() of "
                       "a host graph that still holds its capture, or {} for a new private pool");
  CHECK(bogus.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());

  // A pool lives while a graph holds it.
  first.reset();
  bogus.capture_begin(stream, pool);  // second still holds it
  bogus.capture_end();
  second.reset();
  bogus.reset();
  AcceleratorGraph late("host");
  CHECK_ACCGRAPH_ERROR(
      late.capture_begin(stream, pool), ErrorCode::InvalidArgument,
      fmt::format("no live graph pool has id {{{}, {}}}", pool.first, pool.second));
}

TEST_CASE("every capture mode is honoured") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 64);
  for (CaptureMode mode : {CaptureMode::Default, CaptureMode::Global, CaptureMode::ThreadLocal,
                           CaptureMode::Relaxed}) {
    CAPTURE(to_string(mode));
    AcceleratorGraph graph("host");
    graph.capture_begin(stream, {}, mode);
    stream.fill(data, static_cast<uint8_t>(mode) + 10);
    graph.capture_end();
    graph.replay();
    CHECK(read_back(stream, data)[0] == static_cast<uint8_t>(mode) + 10);
  }
}

TEST_CASE("fork/join: forked work is recorded and ordered; misuse is reported") {
  Stream origin = Stream::create("host");
  Stream forked = Stream::create("host");
  Stream eager = Stream::create("host");
  std::vector<std::string> order;
  AcceleratorGraph graph("host");
  graph.enable_debug_mode();
  graph.capture_begin(origin);
  origin.host_call([&] { order.push_back("origin before fork"); });
  forked.wait(origin);
  CHECK(forked.capturing_graph() == &graph);
  forked.host_call([&] { order.push_back("forked"); });
  CHECK_ACCGRAPH_ERROR(origin.wait(eager), ErrorCode::InvalidState,
                       "a graph cannot wait for eager work");
  origin.wait(forked);
  origin.host_call([&] { order.push_back("origin after join"); });
  graph.capture_end();
  CHECK(order.empty());
  CHECK(graph.stats().nodes == 3);
  graph.replay();
  origin.synchronize();
  CHECK(order == std::vector<std::string>{"origin before fork", "forked", "origin after join"});

  // The DOT dump shows the fork and join edges.
  std::string path = own_path("test_graph_fork", graph.id());
  graph.debug_dump(path);
  std::string dot = read_file(path);
  std::remove(path.c_str());
  CHECK(dot.find("digraph") != std::string::npos);
  CHECK(dot.find("n0 -> n1;") != std::string::npos);  // fork
  CHECK(dot.find("n1 -> n2;") != std::string::npos);  // join
  CHECK(dot.find("n0 -> n2;") != std::string::npos);  // origin's own order

  // Two captures cannot be joined.
  AcceleratorGraph a("host"), b("host");
  a.capture_begin(origin);
  b.capture_begin(forked);
  CHECK_ACCGRAPH_ERROR(forked.wait(origin), ErrorCode::InvalidState,
                       "capturing into another graph than the stream it waits for");
  a.reset();
  b.reset();

  // Unjoined work fails capture_end and leaves everything reusable.
  graph.reset();
  graph.capture_begin(origin);
  forked.wait(origin);
  forked.host_call([] {});
  forked.host_call([] {});
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState,
                       fmt::format("capture_end: unjoined work on stream"));
  CHECK_ACCGRAPH_ERROR(graph.capture_end(), ErrorCode::InvalidState, "is not capturing");
  CHECK_FALSE(origin.is_capturing());
  CHECK_FALSE(forked.is_capturing());
  graph.capture_begin(origin);
  forked.wait(origin);  // a fork with no work needs no join
  graph.capture_end();
}

TEST_CASE("the unjoined-work message counts the operations and says what to call") {
  Stream origin = Stream::create("host");
  Stream forked = Stream::create("host");
  AcceleratorGraph graph("host");
  graph.capture_begin(origin);
  forked.wait(origin);
  forked.host_call([] {});
  origin.wait(forked);
  forked.host_call([] {});  // after the join: not joined
  try {
    graph.capture_end();
    FAIL("capture_end accepted unjoined work");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidState);
    CHECK(e.message().find("(1 operation(s))") != std::string::npos);
    CHECK(e.message().find("call origin.wait(forked) before capture_end") != std::string::npos);
  }
}

TEST_CASE("launches of one graph run one after another, on any stream") {
  Stream first = Stream::create("host");
  Stream second = Stream::create("host");
  std::mutex mutex;
  std::vector<int> log;
  std::atomic<int> next{0};
  AcceleratorGraph graph("host");
  graph.capture_begin(first);
  first.host_call([&] {
    int n = next++;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(mutex);
    log.push_back(n);
  });
  graph.capture_end();
  for (int i = 0; i < 20; ++i) graph.replay(i % 2 == 0 ? first : second);
  first.synchronize();
  second.synchronize();
  REQUIRE(log.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(log[static_cast<size_t>(i)] == i);  // never overlapped
}

TEST_CASE("a failing host call in a replay is reported by synchronize, naming the node") {
  Stream stream = Stream::create("host");
  std::atomic<int> after{0};
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  stream.host_call([] {});
  stream.host_call([] { throw std::runtime_error("node broke"); });
  stream.host_call([&] { ++after; });
  graph.capture_end();
  graph.replay();
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::BackendError,
                       "operation 'host_call (node 1 of a replay of host graph");
  CHECK(after == 1);  // the rest of the replay still ran
  graph.replay();
  CHECK_ACCGRAPH_ERROR(stream.synchronize(), ErrorCode::BackendError, "node broke");
}

TEST_CASE("debug_dump needs debug mode or keep_graph once instantiated") {
  Stream stream = Stream::create("host");
  Buffer data = Buffer::allocate(stream, 4096);
  AcceleratorGraph plain("host");
  plain.capture_begin(stream);
  stream.fill(data, 1);
  plain.capture_end();
  CHECK_ACCGRAPH_ERROR(plain.debug_dump("unused.dot"), ErrorCode::InvalidState,
                       "call enable_debug_mode() (or create the graph with "
                       "GraphArgs::keep_graph) before capture_begin");

  AcceleratorGraph kept("host", GraphArgs{true});
  kept.capture_begin(stream);
  stream.fill(data, 1);
  stream.copy(data.data(), data.data(), 0);  // zero bytes: not recorded
  kept.capture_end();
  kept.replay();
  stream.synchronize();  // before `data` is freed: the replay writes it asynchronously
  std::string path = own_path("test_graph_kept", kept.id());
  kept.debug_dump(path);
  std::string dot = read_file(path);
  std::remove(path.c_str());
  CHECK(dot.find("fill\\n4096 bytes") != std::string::npos);
  CHECK(dot.find("stream ") != std::string::npos);
  CHECK(kept.stats().nodes == 1);

  CHECK_ACCGRAPH_ERROR(kept.debug_dump("/nonexistent-dir/x.dot"), ErrorCode::BackendError,
                       "debug_dump: cannot open '/nonexistent-dir/x.dot' for writing");
}

TEST_CASE("replaying a graph inside another capture records it as one node") {
  Stream stream = Stream::create("host");
  Stream other = Stream::create("host");
  std::atomic<int> runs{0};
  AcceleratorGraph inner("host");
  inner.capture_begin(stream);
  stream.host_call([&] { ++runs; });
  inner.capture_end();
  AcceleratorGraph outer("host");
  outer.capture_begin(other);
  inner.replay(other);
  outer.capture_end();
  CHECK(runs == 0);
  outer.replay();
  outer.replay();
  other.synchronize();
  CHECK(runs == 2);
  inner.replay();  // not ordered behind the nodes in `outer`: must not wait for them
  stream.synchronize();
  CHECK(runs == 3);
}

namespace {

/// The host backend's objects under a backend that does not claim pool_sharing: the core must
/// refuse a shared pool before the (host) graph, which would accept it, is called.
class NoPoolSharingBackend final : public test::HostAliasBackend {
 public:
  using HostAliasBackend::HostAliasBackend;
  Capabilities capabilities(int device) const override {
    Capabilities caps = host().capabilities(device);
    caps.pool_sharing = false;
    return caps;
  }
};

}  // namespace

TEST_CASE("pool sharing is refused by the core when capabilities().pool_sharing is false") {
  test::register_host_alias<NoPoolSharingBackend>("host_no_pools", "test_graph.cpp");
  Stream stream = Stream::create("host_no_pools");
  AcceleratorGraph first("host_no_pools");
  first.capture_begin(stream);
  first.capture_end();
  const PoolId pool = first.pool();  // a live pool of the host graphs underneath
  REQUIRE_FALSE(pool.is_new_private());

  AcceleratorGraph second("host_no_pools");
  CHECK_ACCGRAPH_ERROR(second.capture_begin(stream, pool), ErrorCode::Unsupported,
                       fmt::format("capture_begin: graph pool {{{}, {}}} cannot be shared: backend "
                                   "'host_no_pools' does not share pools between graphs "
                                   "(capabilities().pool_sharing is false); pass {{}} for a new "
                                   "private pool",
                                   pool.first, pool.second));
  CHECK(second.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  second.capture_begin(stream);  // a new private pool is still fine
  second.capture_end();
  CHECK(second.pool() != pool);
}
