// Tests of hooks.hpp: observers see every lifecycle event in order, can be removed, and a
// failing capture hook aborts the capture and leaves the graph reusable.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "accgraph/accgraph.hpp"

namespace {

struct RecordingObserver : accgraph::GraphObserver {
  std::vector<std::string> events;
  bool fail_on_capture_begin = false;
  void on_capture_begin(accgraph::AcceleratorGraph& g, accgraph::Stream& s) override {
    CHECK(s.is_capturing());
    CHECK(accgraph::AcceleratorGraph::current() == &g);
    events.push_back("capture_begin");
    if (fail_on_capture_begin) throw std::runtime_error("observer refuses");
  }
  void on_capture_ending(accgraph::AcceleratorGraph&, accgraph::Stream& s) override {
    CHECK(s.is_capturing());
    events.push_back("capture_ending");
  }
  void on_capture_end(accgraph::AcceleratorGraph&) override { events.push_back("capture_end"); }
  void on_instantiate(accgraph::AcceleratorGraph&) override { events.push_back("instantiate"); }
  void on_replay_begin(accgraph::AcceleratorGraph&, accgraph::Stream&) override {
    events.push_back("replay_begin");
  }
  void on_replay_end(accgraph::AcceleratorGraph& g, accgraph::Stream&) override {
    events.push_back("replay_end " + std::to_string(g.replay_count()));
  }
  void on_reset(accgraph::AcceleratorGraph&) override { events.push_back("reset"); }
  void on_destroy(accgraph::AcceleratorGraph&) noexcept override { events.push_back("destroy"); }
  void on_stream_destroy(accgraph::Stream& s) noexcept override {
    // The handle is usable during the call (the queue is still there).
    events.push_back("stream_destroy " + std::to_string(s.id()) +
                     (s.is_capturing() ? " capturing" : ""));
  }
};

}  // namespace

TEST_CASE("an observer sees every lifecycle event of a graph, in order") {
  RecordingObserver observer;
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::Buffer buffer = accgraph::Buffer::allocate(stream, 64);
  {
    accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
    accgraph::AcceleratorGraph graph("host");
    graph.capture_begin(stream);
    stream.fill(buffer, 1);
    graph.capture_end();
    graph.replay();
    graph.replay();
    graph.reset();
  }
  std::vector<std::string> expected = {
      "capture_begin", "capture_ending", "capture_end",  "instantiate", "replay_begin",
      "replay_end 1",  "replay_begin",   "replay_end 2", "reset",       "destroy"};
  CHECK(observer.events == expected);
  stream.synchronize();
}

TEST_CASE("a removed observer sees nothing") {
  RecordingObserver observer;
  accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
  handle.remove();
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  graph.capture_end();
  CHECK(observer.events.empty());
}

TEST_CASE("installing the same observer twice is an error") {
  RecordingObserver observer;
  accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
  try {
    auto second = accgraph::add_graph_observer(observer);
    FAIL("expected an error");
  } catch (const accgraph::Error& e) {
    CHECK(e.code() == accgraph::ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("already installed") != std::string::npos);
  }
}

TEST_CASE("a capture hook that throws aborts the capture; the graph stays usable") {
  RecordingObserver observer;
  observer.fail_on_capture_begin = true;
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::AcceleratorGraph graph("host");
  {
    accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
    CHECK_THROWS_WITH_AS(graph.capture_begin(stream), "observer refuses", std::runtime_error);
  }
  CHECK(graph.state() == accgraph::GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  CHECK(accgraph::AcceleratorGraph::current() == nullptr);
  graph.capture_begin(stream);  // usable again
  graph.capture_end();
  CHECK(graph.state() == accgraph::GraphState::Instantiated);
}

TEST_CASE("on_stream_destroy: once, when the last handle dies, after the capture it began ended") {
  RecordingObserver observer;
  accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
  accgraph::AcceleratorGraph graph("host");
  uint64_t id = 0;
  {
    accgraph::Stream stream = accgraph::Stream::create("host");
    id = stream.id();
    graph.capture_begin(stream);
    accgraph::Stream moved = std::move(stream);  // a move is not a destruction
    CHECK(observer.events == std::vector<std::string>{"capture_begin"});
  }
  // Destroying the capture stream aborted the capture (reset) before the hook ran.
  std::vector<std::string> expected = {"capture_begin", "reset",
                                       "stream_destroy " + std::to_string(id)};
  CHECK(observer.events == expected);
  CHECK(graph.state() == accgraph::GraphState::Empty);
}

// Issue "Timing layer v2" item 3: replays call no hook an observer did not ask for, and a
// profiler adds nothing to replays of graphs it does not time.
TEST_CASE("ObserverEvents::Lifecycle: every hook but the replay ones; replays call nothing") {
  RecordingObserver observer;
  accgraph::ObserverHandle handle =
      accgraph::add_graph_observer(observer, accgraph::ObserverEvents::Lifecycle);
  accgraph::Stream stream = accgraph::Stream::create("host");
  {
    accgraph::AcceleratorGraph graph("host");
    graph.capture_begin(stream);
    graph.capture_end();
    CHECK(graph.replay_hooks() == 0);
    graph.replay();
    graph.reset();
  }
  std::vector<std::string> expected = {"capture_begin", "capture_ending", "capture_end",
                                       "instantiate",   "reset",          "destroy"};
  CHECK(observer.events == expected);

  RecordingObserver all;
  accgraph::ObserverHandle all_handle = accgraph::add_graph_observer(all);
  accgraph::AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  graph.capture_end();
  CHECK(graph.replay_hooks() == 1);
  all_handle.remove();
  CHECK(graph.replay_hooks() == 0);
  stream.synchronize();
}

TEST_CASE("a profiler hooks only the replays of the graphs it times") {
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::AcceleratorGraph timed("host");
  accgraph::AcceleratorGraph untimed("host");
  accgraph::timing::Profiler profiler;
  profiler.attach(timed);
  timed.capture_begin(stream);
  { auto region = profiler.region(stream, "work"); }
  timed.capture_end();
  untimed.capture_begin(stream);
  untimed.capture_end();
  CHECK(untimed.replay_hooks() == 0);
  CHECK(timed.replay_hooks() == 1);
  {
    accgraph::timing::Profiler second;
    second.attach_all();
    CHECK(untimed.replay_hooks() == 0);  // attach_all times captures that begin from now on
    untimed.reset();
    untimed.capture_begin(stream);
    { auto region = second.region(stream, "work"); }  // a capture without regions is not hooked
    untimed.capture_end();
    CHECK(untimed.replay_hooks() == 1);
    untimed.replay();
  }
  CHECK(untimed.replay_hooks() == 0);  // the destroyed profiler unhooked itself
  untimed.replay();
  timed.replay();
  profiler.flush();
  CHECK(profiler.delivered() == 1);
  timed.reset();
  CHECK(timed.replay_hooks() == 0);
}

// Note [Replay fast path] in core/graph.cpp: a replay with no hook makes no Stream handle; one
// installed later is called from the next replay on, with the stream the replay runs on.
TEST_CASE("an observer installed after the capture sees the next replays, on their streams") {
  struct StreamObserver : accgraph::GraphObserver {
    std::vector<uint64_t> begins, ends;
    void on_replay_begin(accgraph::AcceleratorGraph&, accgraph::Stream& s) override {
      begins.push_back(s.id());
    }
    void on_replay_end(accgraph::AcceleratorGraph&, accgraph::Stream& s) override {
      ends.push_back(s.id());
    }
  } observer;
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::Stream other = accgraph::Stream::create("host");
  accgraph::AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  graph.capture_end();
  graph.replay();  // no hook yet
  {
    accgraph::ObserverHandle handle = accgraph::add_graph_observer(observer);
    CHECK(graph.replay_hooks() == 1);
    graph.replay();
    graph.replay(other);
  }
  graph.replay();  // removed: nothing more
  graph.replay(other);
  CHECK(observer.begins == std::vector<uint64_t>{stream.id(), other.id()});
  CHECK(observer.ends == std::vector<uint64_t>{stream.id(), other.id()});
  CHECK(graph.replay_count() == 5);
  stream.synchronize();
  other.synchronize();
}
