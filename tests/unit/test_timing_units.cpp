// Tests of the timing layer's units, each on its own (timing/*.hpp; the facade, Profiler, is
// tested with a fake backend in test_timing.cpp): MarkerRing, ReportStore, Collector and
// RegionRecorder. Built with those sources compiled in (they are internal to libaccgraph).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "timing_seam.hpp"
#include "collector.hpp"
#include "marker_ring.hpp"
#include "region_recorder.hpp"
#include "report_store.hpp"
#include "../support/check_error.hpp"
#include "accgraph/accgraph.hpp"

using namespace accgraph;
using namespace accgraph::timing;

namespace {

// Markers whose sequences complete when the test says so; marker m of sequence s reads back as
// 1000 * s + m. Counts calls, and checks the ring's contract: nothing read twice or unlaunched.
class ScriptedMarkers final : public TimestampMarkers {
 public:
  explicit ScriptedMarkers(size_t depth) : depth_(depth) {}
  std::string strategy() const override { return "scripted"; }
  size_t ring_depth() const override { return depth_; }
  uint64_t resolution_ns() const override { return 1; }
  void begin_sequence(StreamImpl&) override { ++begins; }
  void record(StreamImpl&, uint32_t marker) override { recorded.push_back(marker); }
  void end_sequence(StreamImpl&) override { ++ends; }
  void before_launch(GraphImplInterface&, StreamImpl&, uint64_t sequence) override {
    prepared.push_back(sequence);
  }
  void after_launch(GraphImplInterface&, StreamImpl&, uint64_t sequence) override {
    launched.push_back(sequence);
  }
  void after_eager_sequence(StreamImpl&, uint64_t sequence) override {
    launched.push_back(sequence);
  }
  bool is_complete(uint64_t sequence) override { return sequence < completed; }
  void wait(uint64_t sequence) override {
    if (on_wait) on_wait();
    waited.push_back(sequence);
    if (sequence >= completed) completed = sequence + 1;
  }
  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    if (fail_read_of == static_cast<int64_t>(sequence)) throw std::runtime_error("read failed");
    if (!read_sequences.insert(sequence).second) ++violations;
    for (size_t m = 0; m < count; ++m) times[m] = 1000 * sequence + m;
    last_read = times;
  }

  size_t depth_;
  int begins = 0, ends = 0;
  std::vector<uint32_t> recorded;
  std::vector<uint64_t> prepared, launched, waited;  // before_launch, after_launch, wait
  std::set<uint64_t> read_sequences;
  uint64_t completed = 0;
  int64_t fail_read_of = -1;
  int violations = 0;
  const uint64_t* last_read = nullptr;
  std::function<void()> on_wait;  // called first in wait(), with the ring's lock held
};

// A real stream and graph of the host backend, for the StreamImpl/GraphImpl arguments.
struct HostObjects {
  Stream stream = Stream::create("host");
  AcceleratorGraph graph{"host"};
  HostObjects() {
    graph.capture_begin(stream);
    graph.capture_end();
  }
};

std::shared_ptr<const ReportLayout> layout_of(int regions) {
  std::vector<RegionInfo> infos(static_cast<size_t>(regions));
  for (int i = 0; i < regions; ++i) {
    infos[static_cast<size_t>(i)].name = "r" + std::to_string(i);
    infos[static_cast<size_t>(i)].begin_marker = static_cast<uint32_t>(i);
    infos[static_cast<size_t>(i)].end_marker = static_cast<uint32_t>(i + 1);
  }
  return std::make_shared<const ReportLayout>(ReportSource{"scripted", 0, "", "scripted", 1},
                                              std::move(infos));
}

struct Ring {
  ScriptedMarkers* markers;
  std::shared_ptr<MarkerRing> ring;
};

Ring make_ring(size_t depth, uint64_t graph_id = 7) {
  auto owned = std::make_unique<ScriptedMarkers>(depth);
  ScriptedMarkers* markers = owned.get();
  auto ring = std::make_shared<MarkerRing>(
      std::move(owned), ReportSource{"scripted", 0, "", "scripted", 1}, graph_id);
  return {markers, ring};
}

void launch(MarkerRing& ring, HostObjects& host, std::shared_ptr<const ReportLayout> layout) {
  REQUIRE(ring.before_launch(detail::GraphAccess::impl(host.graph),
                             detail::StreamAccess::impl(host.stream), false));
  ring.after_launch(detail::GraphAccess::impl(host.graph), detail::StreamAccess::impl(host.stream),
                    std::move(layout));
}

}  // namespace

// --- MarkerRing ----------------------------------------------------------------------------------

TEST_CASE("MarkerRing: numbers launches, queues the reportable ones, full at its depth") {
  HostObjects host;
  Ring r = make_ring(2);
  auto layout = layout_of(3);
  CHECK_FALSE(r.ring->full());
  launch(*r.ring, host, nullptr);  // a capture without regions: numbered, nothing to report
  CHECK_FALSE(r.ring->oldest().has_value());
  launch(*r.ring, host, layout);
  CHECK_FALSE(r.ring->full());
  launch(*r.ring, host, layout);
  CHECK(r.ring->full());
  CHECK(r.markers->launched == std::vector<uint64_t>{0, 1, 2});
  REQUIRE(r.ring->oldest().has_value());
  CHECK(r.ring->oldest()->sequence == 1);
  // A launch that needs room finds none: nothing reaches the backend until one is collected.
  GraphImplInterface& graph = detail::GraphAccess::impl(host.graph);
  StreamImpl& stream = detail::StreamAccess::impl(host.stream);
  CHECK(r.markers->prepared == std::vector<uint64_t>{0, 1, 2});
  CHECK_FALSE(r.ring->before_launch(graph, stream, true));
  CHECK(r.markers->prepared == std::vector<uint64_t>{0, 1, 2});
  REQUIRE(r.ring->collect_oldest().has_value());
  CHECK(r.ring->before_launch(graph, stream, true));
  CHECK(r.markers->prepared == std::vector<uint64_t>{0, 1, 2, 3});
}

// Note [Launch waits]: a collecting thread holds the ring's lock while it waits for the device;
// a launch that meets it gives its caller's lock (Python's GIL) up before blocking, so that the
// collecting thread's sink, which may need that lock next, never waits for it. Here the device
// "finishes" only once the launch gave its lock up; without that the collection ends after 10 s
// and the test fails.
TEST_CASE("MarkerRing: a launch blocked by a collection gives its caller's lock up first") {
  HostObjects host;
  Ring r = make_ring(4);
  auto layout = layout_of(1);
  launch(*r.ring, host, layout);  // sequence 0, pending
  std::promise<void> entered;
  std::promise<void> gave_up;
  std::future<void> given_up = gave_up.get_future();
  bool device_timed_out = false;
  r.markers->on_wait = [&] {
    entered.set_value();
    device_timed_out = given_up.wait_for(std::chrono::seconds(10)) != std::future_status::ready;
  };
  struct GateWaits final : LaunchWaits {
    std::promise<void>* gave_up = nullptr;
    int releases = 0;
    int reacquires = 0;
    void release() noexcept override {
      if (releases++ == 0) gave_up->set_value();
    }
    void reacquire() noexcept override { ++reacquires; }
  } waits;
  waits.gave_up = &gave_up;
  std::thread collector([&] { r.ring->collect_oldest(); });
  entered.get_future().wait();  // the collector holds the ring's lock, waiting for the device
  GraphImplInterface& graph = detail::GraphAccess::impl(host.graph);
  StreamImpl& stream = detail::StreamAccess::impl(host.stream);
  CHECK(r.ring->before_launch(graph, stream, true, &waits));
  collector.join();
  CHECK_FALSE(device_timed_out);
  CHECK(waits.releases == 1);
  CHECK(waits.reacquires == 1);
  r.ring->after_launch(graph, stream, layout, MarkerRing::kNextReplay, &waits);  // the lock is free: nothing given up
  CHECK(waits.releases == 1);
  CHECK(r.markers->launched == std::vector<uint64_t>{0, 1});
}

// Note [Ring lock]: no thread is woken on unlock, so a waiter must find the lock by looking
// again, also after sleeping; and the holder's writes must reach the next holder (ThreadSanitizer
// checks the plain counter in CI).
TEST_CASE("RingLock: excludes, hands the holder's writes on, and a sleeping waiter gets it") {
  RingLock lock;
  CHECK(lock.try_lock());
  CHECK_FALSE(lock.try_lock());
  lock.unlock();
  long counter = 0;  // not atomic: only the lock orders the increments
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  auto work = [&] {
    for (int i = 0; i < 20000; ++i) {
      std::lock_guard<RingLock> guard(lock);
      if (inside.fetch_add(1) != 0) overlapped = true;
      ++counter;
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (i % 100 == 0) std::this_thread::yield();  // a broken lock lets another thread in here
      inside.fetch_sub(1);
    }
  };
  std::thread a(work), b(work), c(work);
  a.join();
  b.join();
  c.join();
  CHECK_FALSE(overlapped.load());
  CHECK(counter == 60000);
  // Held for longer than the waiter's spinning and yielding: it sleeps, then gets the lock.
  lock.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    lock.lock();
    got = true;
    lock.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(got.load());
  lock.unlock();
  waiter.join();
  CHECK(got.load());
}

TEST_CASE("MarkerRing: collect_oldest reads into the report's own storage, oldest first") {
  HostObjects host;
  Ring r = make_ring(4);
  auto layout = layout_of(2);
  launch(*r.ring, host, layout);
  launch(*r.ring, host, layout);
  std::optional<ReplayReport> first = r.ring->collect_oldest();
  REQUIRE(first.has_value());
  CHECK(first->marker_times().data() == r.markers->last_read);  // no copy after read()
  CHECK(first->graph_id() == 7);
  CHECK(first->replay_index() == 0);
  CHECK(first->marker_times() == std::vector<uint64_t>{0, 1, 2});
  CHECK(&first->layout() == layout.get());  // shared, not copied
  std::optional<ReplayReport> second = r.ring->collect_oldest();
  REQUIRE(second.has_value());
  CHECK(second->region(1).start_ns() == 1001);
  CHECK_FALSE(r.ring->collect_oldest().has_value());
  CHECK(r.markers->waited == std::vector<uint64_t>{0, 1});
  CHECK(r.markers->violations == 0);
}

TEST_CASE("MarkerRing: recycled times are the next report's storage, every value read anew") {
  // Note [Recycled times]: the storage of a report nobody kept is read into again, without a
  // fill first; read() overwrites each value, also when the next layout has more markers.
  HostObjects host;
  Ring r = make_ring(4);
  launch(*r.ring, host, layout_of(2));
  launch(*r.ring, host, layout_of(4));
  std::vector<uint64_t> stale{7, 7, 7};
  const uint64_t* storage = stale.data();
  r.ring->recycle_times(std::move(stale));
  std::optional<ReplayReport> first = r.ring->collect_oldest();
  REQUIRE(first.has_value());
  CHECK(first->marker_times().data() == storage);  // no new vector
  CHECK(first->marker_times() == std::vector<uint64_t>{0, 1, 2});
  r.ring->recycle_times(std::vector<uint64_t>{9, 9, 9});
  std::optional<ReplayReport> second = r.ring->collect_oldest();
  REQUIRE(second.has_value());
  CHECK(second->marker_times() == std::vector<uint64_t>{1000, 1001, 1002, 1003, 1004});
  CHECK(second->marker_times().data() == r.markers->last_read);  // still zero-copy
}

TEST_CASE("MarkerRing: a report gets its launch's layout, kept while a pending launch names it") {
  // Note [Kept layouts]: pending entries point at their layout; the ring keeps each alive.
  HostObjects host;
  Ring r = make_ring(8);
  auto a = layout_of(1);
  auto b = layout_of(2);
  std::weak_ptr<const ReportLayout> a_alive = a, b_alive = b;
  launch(*r.ring, host, a);
  launch(*r.ring, host, a);
  launch(*r.ring, host, b);
  launch(*r.ring, host, nullptr);  // nothing to report: names no layout
  launch(*r.ring, host, a);        // a again after b: a layout of its own in the ring's list
  a.reset();
  b.reset();
  std::vector<size_t> regions;
  for (int i = 0; i < 2; ++i) {
    std::optional<ReplayReport> report = r.ring->collect_oldest();
    REQUIRE(report.has_value());
    regions.push_back(report->size());
  }
  CHECK_FALSE(a_alive.expired());  // the fifth launch still names it
  CHECK_FALSE(b_alive.expired());  // the third
  std::optional<ReplayReport> third = r.ring->collect_oldest();
  REQUIRE(third.has_value());
  regions.push_back(third->size());
  CHECK(third->layout().regions().size() == 2);
  third.reset();
  std::optional<ReplayReport> fifth = r.ring->collect_oldest();
  REQUIRE(fifth.has_value());
  regions.push_back(fifth->size());
  CHECK(b_alive.expired());  // collected, and no pending launch names it
  CHECK(regions == std::vector<size_t>{1, 1, 2, 1});
  CHECK_FALSE(r.ring->collect_oldest().has_value());
  // The newest stays for the next launch with it (a graph holds its layout anyway); the ring's
  // destruction releases it.
  CHECK_FALSE(a_alive.expired());
  fifth.reset();
  r.ring.reset();
  CHECK(a_alive.expired());
}

TEST_CASE("MarkerRing: a failed read still frees the slot, and the failure reaches the caller") {
  HostObjects host;
  Ring r = make_ring(1);
  launch(*r.ring, host, layout_of(1));
  r.markers->fail_read_of = 0;
  CHECK_THROWS_WITH(r.ring->collect_oldest(), "read failed");
  CHECK_FALSE(r.ring->full());  // popped: the next launch may use the slot
  CHECK_FALSE(r.ring->oldest().has_value());
}

TEST_CASE("MarkerRing: oldest_complete polls the oldest; wait_last_launch waits the last one") {
  HostObjects host;
  Ring r = make_ring(4);
  CHECK_FALSE(r.ring->oldest_complete());  // none pending
  launch(*r.ring, host, layout_of(1));
  launch(*r.ring, host, nullptr);
  CHECK_FALSE(r.ring->oldest_complete());
  r.markers->completed = 1;
  CHECK(r.ring->oldest_complete());
  r.ring->wait_last_launch();
  CHECK(r.markers->waited.back() == 1);  // the unreported launch, too
}

// --- ReportStore ---------------------------------------------------------------------------------

namespace {
ReplayReport numbered(uint64_t index) {
  RegionSample sample;
  sample.info.name = "work";
  sample.end_ns = 10 + index;
  return ReplayReport::from_samples({"host", 0, "", "", 1}, 1, index, {sample});
}
}  // namespace

TEST_CASE("ReportStore: keeps the last N reports, oldest first; 0 keeps none") {
  for (uint64_t keep : {uint64_t{0}, uint64_t{1}, uint64_t{3}, KeepReports::all().count()}) {
    CAPTURE(keep);
    ReportStore store(keep, StatsMode::Sketch);
    for (uint64_t i = 0; i < 5; ++i) store.deliver(numbered(i));
    const std::vector<ReplayReport> kept = store.reports();
    CHECK(kept.size() == std::min<uint64_t>(keep, 5));
    for (size_t k = 0; k < kept.size(); ++k) CHECK(kept[k].replay_index() == 5 - kept.size() + k);
    CHECK(store.delivered() == 5);
    REQUIRE(store.stats().size() == 1);
    CHECK(store.stats()[0].count == 5);  // statistics see every report, kept or not
  }
}

TEST_CASE("ReportStore: collect_stats false leaves the statistics empty, nothing else") {
  ReportStore store(1, StatsMode::Sketch, false);
  size_t sunk = 0;
  store.add_sink([&](const ReplayReport&) { ++sunk; });
  store.deliver(numbered(0));
  CHECK(store.stats().empty());
  CHECK(sunk == 1);
  CHECK(store.reports().size() == 1);
  CHECK(store.delivered() == 1);
}

TEST_CASE("ReportStore: sinks see every report in order; one that throws stops nothing") {
  ReportStore store(0, StatsMode::Sketch);
  std::vector<uint64_t> first, second;
  store.add_sink([&](const ReplayReport& r) {
    first.push_back(r.replay_index());
    throw std::runtime_error("sink failed");
  });
  store.add_sink([&](const ReplayReport& r) { second.push_back(r.replay_index()); });
  for (uint64_t i = 0; i < 3; ++i) store.deliver(numbered(i));
  CHECK(first == std::vector<uint64_t>{0, 1, 2});
  CHECK(second == std::vector<uint64_t>{0, 1, 2});
  CHECK_ACCGRAPH_ERROR(store.add_sink(Sink()), ErrorCode::InvalidArgument, "the sink is empty");
}

TEST_CASE("ReportStore: a sink may read the store (it runs outside the store's lock)") {
  ReportStore store(2, StatsMode::Sketch);
  size_t seen = 0;
  store.add_sink(
      [&](const ReplayReport&) { seen = store.reports().size() + store.stats().size(); });
  store.deliver(numbered(0));
  store.deliver(numbered(1));
  CHECK(seen == 2);  // one kept report (the current one is kept after the sinks) + one series
}

// --- Collector -----------------------------------------------------------------------------------

TEST_CASE("Collector: make_room collects only until one slot is free, oldest first") {
  HostObjects host;
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  Ring r = make_ring(2);
  collector.add(r.ring);
  auto layout = layout_of(1);
  launch(*r.ring, host, layout);
  collector.make_room(*r.ring);  // not full: nothing collected
  CHECK(store.delivered() == 0);
  launch(*r.ring, host, layout);
  collector.make_room(*r.ring);
  CHECK(store.delivered() == 1);
  CHECK(store.reports()[0].replay_index() == 0);
  CHECK(r.markers->waited == std::vector<uint64_t>{0});
}

TEST_CASE("Collector: flush collects every ring and rethrows the first failure after all") {
  HostObjects host;
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  Ring a = make_ring(4, 1), b = make_ring(4, 2);
  collector.add(a.ring);
  collector.add(b.ring);
  auto layout = layout_of(1);
  for (int i = 0; i < 2; ++i) {
    launch(*a.ring, host, layout);
    launch(*b.ring, host, layout);
  }
  a.markers->fail_read_of = 1;
  CHECK_THROWS_WITH(collector.flush(), "read failed");
  // a's sequence 0 and both of b's were delivered; a's failed one is gone, not retried forever.
  CHECK(store.delivered() == 3);
  CHECK_NOTHROW(collector.flush());
}

TEST_CASE("Collector: collect_completed delivers only finished sequences; retire forgets") {
  HostObjects host;
  ReportStore store(0, StatsMode::Sketch);
  Collector collector(store);
  Ring r = make_ring(4);
  collector.add(r.ring);
  auto layout = layout_of(1);
  for (int i = 0; i < 3; ++i) launch(*r.ring, host, layout);
  r.markers->completed = 2;
  collector.collect_completed();
  CHECK(store.delivered() == 2);
  collector.retire(r.ring);
  CHECK(store.delivered() == 3);
  launch(*r.ring, host, layout);  // no longer the collector's: flush leaves it alone
  collector.flush();
  CHECK(store.delivered() == 3);
}

TEST_CASE("Collector: the background thread delivers finished sequences without a flush") {
  HostObjects host;
  ReportStore store(0, StatsMode::Sketch);
  Collector collector(store);
  Ring r = make_ring(4);
  collector.add(r.ring);
  r.markers->completed = 100;
  launch(*r.ring, host, layout_of(1));
  collector.start(std::chrono::microseconds(100));
  for (int i = 0; i < 2000 && store.delivered() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  collector.stop();
  CHECK(store.delivered() == 1);
}

// --- RegionRecorder ------------------------------------------------------------------------------

namespace {
// What the profiler does before a stream's first eager region (ProfilerCore::give_eager_ring).
void give_eager_ring(RegionRecorder& recorder, Collector& collector, Stream& stream) {
  auto ring = MarkerRing::create(stream.backend(), "host", 0, 0, MarkerOptions{});
  collector.add(ring);
  REQUIRE(recorder.adopt_eager_ring(stream, ring));
  CHECK_FALSE(recorder.adopt_eager_ring(stream, ring));  // a stream has one
}
}  // namespace

// audit 2026-12-07 R12: a refused out-of-order end left the region open, and every later region
// on the stream nested in it and was never reported (Note [Regions out of order]).
TEST_CASE("RegionRecorder: a region ended out of order is dropped, its inner regions move up") {
  Stream stream = Stream::create("host");
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  RegionRecorder recorder;
  give_eager_ring(recorder, collector, stream);
  const uint64_t outer = recorder.begin(stream, nullptr, "outer", {}, "");
  const uint64_t a = recorder.begin(stream, nullptr, "a", {}, "");
  const uint64_t b = recorder.begin(stream, nullptr, "b", {}, "");
  const uint64_t c = recorder.begin(stream, nullptr, "c", {}, "");
  CHECK_ACCGRAPH_ERROR((void)recorder.end(stream, nullptr, a), ErrorCode::InvalidState,
                       "region 'outer/a' on stream");
  CHECK_FALSE(recorder.is_open(stream.id(), a));
  CHECK_ACCGRAPH_ERROR((void)recorder.end(stream, nullptr, a), ErrorCode::InvalidState,
                       "the region is no longer open");
  try {
    (void)recorder.end(stream, nullptr, b);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.reason() == ErrorReason::RegionOrder);
    CHECK(std::string(e.what()).find(
              "'outer/a/b/c' began after it and is still open, so 'outer/a/b' is dropped and not "
              "reported (the regions that began inside it still are); end regions in the reverse "
              "order they began") != std::string::npos);
  }
  CHECK((recorder.end(stream, nullptr, c) == nullptr));
  const uint64_t d = recorder.begin(stream, nullptr, "d", {}, "");  // in `outer`, as before
  CHECK((recorder.end(stream, nullptr, d) == nullptr));
  CHECK((recorder.end(stream, nullptr, outer) == recorder.eager_ring(stream.id())));
  // The stream goes on: the next region is a tree of its own.
  const uint64_t e = recorder.begin(stream, nullptr, "e", {}, "");
  CHECK((recorder.end(stream, nullptr, e) == recorder.eager_ring(stream.id())));
  collector.flush();
  REQUIRE(store.reports().size() == 2);
  const ReplayReport report = store.reports()[0];
  REQUIRE(report.size() == 3);
  CHECK(report.region(0).path() == "outer");
  CHECK(report.region(1).path() == "outer/c");
  CHECK(report.region(1).parent() == 0);
  CHECK(report.region(1).depth() == 1);
  CHECK(report.region(2).path() == "outer/d");
  CHECK(report.region(2).parent() == 0);
  for (const RegionTiming& t : report.regions()) CHECK(t.start_ns() <= t.end_ns());
  CHECK(store.reports()[1].region(0).path() == "e");
}

// audit 2026-12-07 X02, 2026-11-25 #19: threads sharing a stream nested their regions in each
// other's and ended them out of order (Note [Regions out of order]).
TEST_CASE("RegionRecorder: a region of another thread cannot begin inside one of this thread's") {
  Stream stream = Stream::create("host");
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  RegionRecorder recorder;
  give_eager_ring(recorder, collector, stream);
  const uint64_t a = recorder.begin(stream, nullptr, "a", {}, "");
  std::thread([&] {
    CHECK_ACCGRAPH_ERROR((void)recorder.begin(stream, nullptr, "b", {}, ""),
                         ErrorCode::InvalidState,
                         "begin('b'): region 'a' on stream " + std::to_string(stream.id()) +
                             " was begun by another thread and is still open");
  }).join();
  const uint64_t inner = recorder.begin(stream, nullptr, "inner", {}, "");  // this thread's
  CHECK((recorder.end(stream, nullptr, inner) == nullptr));
  std::thread([&] {
    // Ended on another thread: allowed; then the stream is free for any thread.
    CHECK((recorder.end(stream, nullptr, a) == recorder.eager_ring(stream.id())));
    const uint64_t b = recorder.begin(stream, nullptr, "b", {}, "");
    CHECK((recorder.end(stream, nullptr, b) == recorder.eager_ring(stream.id())));
  }).join();
  collector.flush();
  CHECK(store.reports().size() == 2);
}

TEST_CASE(
    "RegionRecorder: adjacent boundaries share a marker; lanes and metadata kept; recording "
    "never delivers") {
  Stream stream = Stream::create("host");
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  RegionRecorder recorder;
  give_eager_ring(recorder, collector, stream);
  const uint64_t outer = recorder.begin(stream, nullptr, "step", {{"k", "v"}}, "");
  for (const char* name : {"x", "y", "z"})
    CHECK((recorder.end(stream, nullptr, recorder.begin(stream, nullptr, name, {}, "attention")) ==
           nullptr));
  std::shared_ptr<MarkerRing> closed = recorder.end(stream, nullptr, outer);
  REQUIRE((closed != nullptr));  // the outermost region closed the eager tree...
  stream.synchronize();
  CHECK(store.delivered() == 0);  // ...which the recorder only queued: the caller collects
  collector.collect_all(*closed);
  REQUIRE(store.delivered() == 1);
  const ReplayReport report = store.reports()[0];
  // 4 regions, 4 markers (not 8): step and x begin together, each sibling's end is the next
  // one's begin, z and step end together (Note [Boundary sharing]).
  CHECK(report.layout().marker_count() == 4);
  CHECK(report.region(0).start_ns() == report.region(1).start_ns());
  CHECK(report.region(3).end_ns() == report.region(0).end_ns());
  CHECK(report.region(1).end_ns() == report.region(2).start_ns());
  CHECK(report.region(1).lane() == "attention");
  CHECK(report.region(0).lane().empty());
  CHECK(report.region(0).metadata() == Metadata{{"k", "v"}});
}

TEST_CASE(
    "RegionRecorder: a capture with a region still open cannot end; a closed one refuses "
    "regions") {
  Stream stream = Stream::create("host");
  ReportStore store(0, StatsMode::Sketch);
  Collector collector(store);
  RegionRecorder recorder;
  auto ring = MarkerRing::create(stream.backend(), "host", 0, 3, MarkerOptions{});
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  std::shared_ptr<Recording> capture = recorder.begin_capture(stream, 3);
  CHECK_ACCGRAPH_ERROR(recorder.begin(stream, capture, "early", {}, ""), ErrorCode::InvalidState,
                       "has no marker sequence");
  CHECK(recorder.begin_sequence(capture, ring, stream));
  CHECK_FALSE(recorder.begin_sequence(capture, ring, stream));  // once per capture
  const uint64_t open = recorder.begin(stream, capture, "layer", {}, "");
  CHECK_ACCGRAPH_ERROR(recorder.end_capture(capture, stream, 3), ErrorCode::InvalidState,
                       "region 'layer' on stream");
  CHECK((recorder.end(stream, capture, open) == nullptr));  // not an eager tree
  std::shared_ptr<const ReportLayout> layout = recorder.end_capture(capture, stream, 3);
  REQUIRE(layout->regions().size() == 1);
  CHECK(layout->marker_count() == 2);
  CHECK_ACCGRAPH_ERROR(recorder.begin(stream, capture, "late", {}, ""), ErrorCode::InvalidState,
                       "ended while the region began");
  graph.capture_end();
}

namespace {
// The layout of the one eager tree `body` records on a fresh host stream.
std::shared_ptr<const ReportLayout> eager_layout(
    const std::function<void(RegionRecorder&, Stream&)>& body) {
  Stream stream = Stream::create("host");
  ReportStore store(KeepReports::all().count(), StatsMode::Sketch);
  Collector collector(store);
  RegionRecorder recorder;
  give_eager_ring(recorder, collector, stream);
  body(recorder, stream);
  collector.flush();
  REQUIRE(store.reports().size() == 1);
  return store.reports()[0].shared_layout();
}

void region(
    RegionRecorder& recorder, Stream& stream, const char* name,
    const std::function<void()>& inside = [] {}) {
  recorder.begin(stream, nullptr, name, {}, "");
  inside();
  (void)recorder.end(stream, nullptr, 0);
}

std::vector<std::pair<uint32_t, uint32_t>> markers_of(const ReportLayout& layout) {
  std::vector<std::pair<uint32_t, uint32_t>> markers;
  for (const RegionInfo& info : layout.regions())
    markers.emplace_back(info.begin_marker, info.end_marker);
  return markers;
}
}  // namespace

TEST_CASE("RegionRecorder: nested boundaries share: a parent with two children needs 3 markers") {
  auto layout = eager_layout([](RegionRecorder& recorder, Stream& stream) {
    region(recorder, stream, "P", [&] {
      region(recorder, stream, "C1");
      region(recorder, stream, "C2");
    });
  });
  CHECK(layout->marker_count() == 3);
  // begin(P) = begin(C1), end(C1) = begin(C2), end(C2) = end(P); an empty region keeps two.
  using M = std::vector<std::pair<uint32_t, uint32_t>>;
  CHECK(markers_of(*layout) == M{{0, 2}, {0, 1}, {1, 2}});
}

TEST_CASE("RegionRecorder: an empty region keeps two markers, also nested in an empty parent") {
  auto layout = eager_layout([](RegionRecorder& recorder, Stream& stream) {
    region(recorder, stream, "P", [&] { region(recorder, stream, "C"); });
  });
  CHECK(layout->marker_count() == 2);
  using M = std::vector<std::pair<uint32_t, uint32_t>>;
  CHECK(markers_of(*layout) == M{{0, 1}, {0, 1}});
}

TEST_CASE("RegionRecorder: an operation between two boundaries gives each its own marker") {
  std::vector<uint8_t> bytes(64);
  auto fill = [&](Stream& stream) { stream.fill(bytes.data(), 1, bytes.size()); };
  // Between a parent's begin and its first child's begin, between siblings, between the last
  // child's end and its parent's end: every boundary its own marker.
  auto layout = eager_layout([&](RegionRecorder& recorder, Stream& stream) {
    region(recorder, stream, "P", [&] {
      fill(stream);
      region(recorder, stream, "C1", [&] { fill(stream); });
      fill(stream);
      region(recorder, stream, "C2", [&] { fill(stream); });
      fill(stream);
    });
  });
  CHECK(layout->marker_count() == 6);
  using M = std::vector<std::pair<uint32_t, uint32_t>>;
  CHECK(markers_of(*layout) == M{{0, 5}, {1, 2}, {3, 4}});

  // One operation inside each child only: the parent still shares both its boundaries.
  layout = eager_layout([&](RegionRecorder& recorder, Stream& stream) {
    region(recorder, stream, "P", [&] {
      region(recorder, stream, "C1", [&] { fill(stream); });
      region(recorder, stream, "C2", [&] { fill(stream); });
    });
  });
  CHECK(markers_of(*layout) == M{{0, 2}, {0, 1}, {1, 2}});
}

TEST_CASE("RegionRecorder: a capture without regions enqueues nothing and has no layout") {
  Stream stream = Stream::create("host");
  RegionRecorder recorder;
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  std::shared_ptr<Recording> capture = recorder.begin_capture(stream, 5);
  CHECK((capture->ring == nullptr));
  CHECK((recorder.end_capture(capture, stream, 5) == nullptr));
  graph.capture_end();
  CHECK(graph.stats().nodes == 0);  // no begin_sequence, no end_sequence
}
