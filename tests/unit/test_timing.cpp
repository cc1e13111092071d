// Tests of timing.hpp: regions in captured graphs and eagerly, shared markers, marker rings (no
// report lost), delivery modes, errors, and the lifecycle of timed graphs. Most cases run on a
// deterministic fake backend (a virtual clock that only delay() advances, a device that runs
// only when waited on, markers that detect a ring slot overwritten before it was read); the
// last ones run on the host backend.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/spi/marker_kernels.hpp"
#include "accgraph/spi/priority.hpp"
#include "check_error.hpp"

using accgraph::AcceleratorGraph;
using accgraph::Error;
using accgraph::ErrorCode;
using accgraph::ErrorReason;
using accgraph::GraphState;
using accgraph::Stream;
using namespace accgraph::timing;
using namespace std::chrono_literals;

using accgraph::testing::require_error;

namespace {

// Captures into `graph`, on `stream`, one region `name` around a delay of `work` (virtual ns on
// the fake backend), the shape most of these tests replay.
void capture_one_region(AcceleratorGraph& graph, Stream& stream, Profiler& prof,
                        const std::string& name, std::chrono::nanoseconds work) {
  graph.capture_begin(stream);
  {
    auto r = prof.region(stream, name);
    stream.delay(work);
  }
  graph.capture_end();
}

// --- the fake backend ------------------------------------------------------------------------

constexpr const char* kFake = "fake_timing";
constexpr size_t kFakeDefaultRing = 4;

// One in-order device shared by every fake stream; it runs its queue only when asked
// (synchronize, or markers wait()), so launched work really is "in flight" until then.
struct FakeDevice {
  std::mutex mutex;
  std::deque<std::function<void()>> queue;
  uint64_t clock = 1'000'000;  // virtual ns; only delay() advances it

  void push(std::function<void()> op) {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(op));
  }
  void run_all() {
    std::lock_guard<std::mutex> lock(mutex);
    while (!queue.empty()) {
      auto op = std::move(queue.front());
      queue.pop_front();
      op();
    }
  }
};

FakeDevice& fake_device() {
  static FakeDevice device;
  return device;
}

// What the fake markers saw, reset by each test.
struct FakeCounters {
  std::atomic<int> records{0};     // record() calls
  std::atomic<int> violations{0};  // a slot reused or read while holding another sequence
  std::atomic<int> markers_created{0};
  std::atomic<size_t> max_unread{0};         // most sequences launched and not yet read
  std::atomic<int> markers_alive{0};         // marker sets not yet destroyed (not reset per test)
  std::atomic<int> unmeasurable_marker{-1};  // read() reports this marker as kUnmeasurable
  std::atomic<int> read_buffers{0};          // reads into a buffer other than the previous read's
  std::atomic<const uint64_t*> last_read{nullptr};  // where the last read() wrote
  std::atomic<int> capture_queries{0};              // is_capturing() calls
  std::atomic<int> sequences_begun{0};              // begin_sequence() calls
  std::atomic<const void*> begin_stream{nullptr};   // the stream of the last begin_sequence()
  std::atomic<int> forks{0};                        // wait_for() calls that forked a capture
  std::atomic<int> forks_at_begin{-1};              // `forks` at the last begin_sequence()
  std::atomic<int> records_at_begin{-1};            // `records` at the last begin_sequence()
  std::atomic<uint64_t> tail{0};                    // what capture_tail() answers
  std::atomic<int> tail_queries{0};                 // capture_tail() calls
  std::atomic<int> fail_begins{0};                  // begin_sequence() calls still to fail
  void reset() {
    fail_begins = 0;
    sequences_begun = 0;
    begin_stream = nullptr;
    forks = 0;
    forks_at_begin = -1;
    records_at_begin = -1;
    tail = 0;
    tail_queries = 0;
    capture_queries = 0;
    unmeasurable_marker = -1;
    read_buffers = 0;
    records = 0;
    violations = 0;
    markers_created = 0;
    max_unread = 0;
  }
};
FakeCounters counters;

class FakeGraph;

// Implements CaptureTail with the token the test sets (counters.tail); it answers it even when
// not capturing, so the tests see that eager native streams never share by the timing layer's
// own rule (Note [Boundary sharing]).
class FakeStream final : public accgraph::StreamImpl, public accgraph::CaptureTail {
 public:
  uint64_t capture_tail() const noexcept override {
    ++counters.tail_queries;
    return counters.tail.load();
  }
  int device() const override { return 0; }
  void* native_handle() const override { return const_cast<FakeStream*>(this); }
  void copy(void* dst, const void* src, size_t bytes) override {
    enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  void fill(void* dst, uint8_t value, size_t bytes) override {
    enqueue([=] { std::memset(dst, value, bytes); });
  }
  void delay(std::chrono::nanoseconds d) override {
    enqueue([d] { fake_device().clock += static_cast<uint64_t>(d.count()); });
  }
  void wait_for(accgraph::StreamImpl& other) override;
  void synchronize() override { fake_device().run_all(); }
  bool is_capturing() const override {
    ++counters.capture_queries;
    return capture_ != nullptr;
  }

  void enqueue(std::function<void()> op) {
    if (capture_ != nullptr)
      capture_->push_back(std::move(op));
    else
      fake_device().push(std::move(op));
  }

  std::vector<std::function<void()>>* capture_ = nullptr;
  FakeGraph* graph_ = nullptr;
};

class FakeGraph final : public accgraph::GraphImplInterface {
 public:
  void capture_begin(accgraph::StreamImpl& stream, accgraph::PoolId,
                     accgraph::CaptureMode) override {
    join(static_cast<FakeStream&>(stream));
  }
  void join(FakeStream& s) {
    s.capture_ = &ops_;
    s.graph_ = this;
    streams_.push_back(&s);
  }
  void capture_end() override { release(); }
  void instantiate() override {}
  void replay(accgraph::StreamImpl& stream) override {
    for (const auto& op : ops_) static_cast<FakeStream&>(stream).enqueue(op);
  }
  void reset() override {
    release();
    ops_.clear();
  }
  accgraph::PoolId pool() const override { return {1, 1}; }
  void enable_debug_mode() override {}
  void debug_dump(const std::string&) override {}

 private:
  void release() {
    for (FakeStream* s : streams_) {
      s->capture_ = nullptr;
      s->graph_ = nullptr;
    }
    streams_.clear();
  }
  std::vector<std::function<void()>> ops_;
  std::vector<FakeStream*> streams_;
};

void FakeStream::wait_for(accgraph::StreamImpl& other) {
  auto& o = static_cast<FakeStream&>(other);
  if (o.graph_ != nullptr && graph_ == nullptr) {  // fork
    o.graph_->join(*this);
    ++counters.forks;
  }
  // One in-order device: ordering between streams holds already.
}

// Markers with a device-side sequence counter picking the ring slot (Note [Marker ring]), named
// as kernels would be (Note [Marker kernel names]).
class FakeMarkers final : public accgraph::TimestampMarkers, public accgraph::MarkerKernelNames {
 public:
  explicit FakeMarkers(size_t depth) : depth_(depth), slots_(depth), owner_(depth, ~0ull) {
    ++counters.markers_created;
    ++counters.markers_alive;
  }
  ~FakeMarkers() override { --counters.markers_alive; }
  std::string strategy() const override { return "fake-ts"; }
  MarkerKernels marker_kernels() const override {
    return MarkerKernels{{"fake_record_kernel"}, {"fake_wait_record_kernel"}, {"fake_end_kernel"}};
  }
  size_t ring_depth() const override { return depth_; }
  uint64_t resolution_ns() const override { return 1; }

  void begin_sequence(accgraph::StreamImpl& stream) override {
    if (counters.fail_begins > 0) {
      --counters.fail_begins;
      throw Error(ErrorCode::BackendError, "begin_sequence failed (as the test asked)", kFake);
    }
    ++counters.sequences_begun;
    counters.begin_stream = &stream;
    counters.forks_at_begin = counters.forks.load();
    counters.records_at_begin = counters.records.load();
    static_cast<FakeStream&>(stream).enqueue([this] {
      uint64_t sequence = started_++;
      slot_ = sequence % depth_;
      owner_[slot_] = sequence;
      slots_[slot_].clear();
    });
  }
  void record(accgraph::StreamImpl& stream, uint32_t marker) override {
    ++counters.records;
    static_cast<FakeStream&>(stream).enqueue([this, marker] {
      auto& slot = slots_[slot_];
      if (slot.size() <= marker) slot.resize(marker + 1, 0);
      slot[marker] = fake_device().clock;
    });
  }
  void end_sequence(accgraph::StreamImpl& stream) override {
    static_cast<FakeStream&>(stream).enqueue([this] { ++completed_; });
  }
  void before_launch(accgraph::GraphImplInterface&, accgraph::StreamImpl&, uint64_t s) override {
    launched(s);
  }
  void after_eager_sequence(accgraph::StreamImpl&, uint64_t s) override { launched(s); }
  bool is_complete(uint64_t sequence) override {
    std::lock_guard<std::mutex> lock(fake_device().mutex);
    return completed_ > sequence;
  }
  void wait(uint64_t sequence) override {
    fake_device().run_all();
    std::lock_guard<std::mutex> lock(fake_device().mutex);
    if (completed_ <= sequence) ++counters.violations;  // waited for a sequence never launched
  }
  void read(uint64_t sequence, uint64_t* times, size_t count) override {
    std::lock_guard<std::mutex> lock(fake_device().mutex);
    size_t slot = sequence % depth_;
    if (owner_[slot] != sequence || slots_[slot].size() < count) ++counters.violations;
    if (times == nullptr && count > 0) ++counters.violations;
    if (times != last_times_) ++counters.read_buffers;
    last_times_ = times;
    counters.last_read = times;
    unread_.erase(sequence);
    for (size_t m = 0; m < count; ++m) times[m] = m < slots_[slot].size() ? slots_[slot][m] : 0;
    const int unmeasurable = counters.unmeasurable_marker.load();
    if (unmeasurable >= 0 && static_cast<size_t>(unmeasurable) < count)
      times[static_cast<size_t>(unmeasurable)] = kUnmeasurable;
  }

 private:
  void launched(uint64_t sequence) {
    std::lock_guard<std::mutex> lock(fake_device().mutex);
    // The same number again: the launch it was given to failed after before_launch, so that
    // sequence never ran and its slot holds nothing unread.
    if (!unread_.empty() && *unread_.rbegin() == sequence) return;
    for (uint64_t u : unread_)
      if (u % depth_ == sequence % depth_) ++counters.violations;  // would overwrite unread
    unread_.insert(sequence);
    counters.max_unread = std::max(counters.max_unread.load(), unread_.size());
  }

  size_t depth_;
  std::vector<std::vector<uint64_t>> slots_;
  std::vector<uint64_t> owner_;
  uint64_t started_ = 0, completed_ = 0;
  size_t slot_ = 0;
  std::set<uint64_t> unread_;
  const uint64_t* last_times_ = nullptr;  // the buffer the previous read() wrote into
};

class FakeBuffer final : public accgraph::BufferImpl {
 public:
  explicit FakeBuffer(size_t bytes) : data_(bytes) {}
  void* data() const override { return const_cast<uint8_t*>(data_.data()); }
  size_t size() const override { return data_.size(); }
  accgraph::MemoryKind kind() const override { return accgraph::MemoryKind::Host; }

 private:
  std::vector<uint8_t> data_;
};

class FakeBackend final : public accgraph::Backend {
 public:
  std::string name() const override { return kFake; }
  std::vector<accgraph::DeviceInfo> devices() const override { return {{0, "fake device"}}; }
  accgraph::Capabilities capabilities(int) const override {
    accgraph::Capabilities caps;
    caps.multi_stream_capture = true;
    caps.timed_delay = true;
    caps.marker_strategies = {"fake-ts"};
    caps.marker_ring_depth = kFakeDefaultRing;
    caps.timer_resolution_ns = 1;
    return caps;
  }
  std::unique_ptr<accgraph::StreamImpl> create_stream(int) override {
    return std::make_unique<FakeStream>();
  }
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int, void*) override {
    return std::make_unique<FakeStream>();
  }
  std::unique_ptr<accgraph::BufferImpl> allocate(int, size_t bytes, accgraph::MemoryKind) override {
    return std::make_unique<FakeBuffer>(bytes);
  }
  std::unique_ptr<accgraph::GraphImplInterface> create_graph(const accgraph::GraphArgs&) override {
    return std::make_unique<FakeGraph>();
  }
  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int, const accgraph::MarkerOptions& options) override {
    if (!options.strategy.empty() && options.strategy != "fake-ts")
      throw Error(ErrorCode::Unsupported,
                  "marker strategy '" + options.strategy + "' is not supported: use fake-ts",
                  kFake);
    return std::make_unique<FakeMarkers>(options.ring_depth ? options.ring_depth
                                                            : kFakeDefaultRing);
  }
};

// Registers the fake backend once and resets the counters; every test starts from here.
void fresh_fake() {
  static bool registered = [] {
    accgraph::Registry::instance().register_backend(
        kFake, accgraph::priority::fallback, [] { return std::make_unique<FakeBackend>(); },
        "test_timing.cpp");
    return true;
  }();
  (void)registered;
  fake_device().run_all();
  counters.reset();
}

RegionTiming find_region(const ReplayReport& report, const std::string& path) {
  for (RegionTiming r : report.regions())
    if (r.path() == path) return r;
  FAIL("no region " << path);
  return report.region(0);
}

}  // namespace

// --- captured graphs ---------------------------------------------------------------------------

TEST_CASE(
    "a report names its marker kernels as the backend does; markers that are not kernels none") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  Stream stream = Stream::create(kFake);
  graph.capture_begin(stream);
  prof.region(stream, "a").end();
  graph.capture_end();
  graph.replay();
  Stream host = Stream::create("host");
  prof.region(host, "eager").end();
  prof.flush();
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 2);
  const ReplayReport& fake = reports[0].backend() == kFake ? reports[0] : reports[1];
  const ReplayReport& steady = reports[0].backend() == kFake ? reports[1] : reports[0];
  CHECK(fake.marker_kernels().record_at_start == std::vector<std::string>{"fake_record_kernel"});
  CHECK(fake.marker_kernels().record_at_end == std::vector<std::string>{"fake_wait_record_kernel"});
  CHECK(fake.marker_kernels().end == std::vector<std::string>{"fake_end_kernel"});
  CHECK(fake.source().marker_kernels.end == fake.marker_kernels().end);
  CHECK(steady.backend() == "host");
  CHECK(steady.marker_kernels().empty());  // steady_clock markers are not kernels
}

TEST_CASE("regions in a captured graph: one report per replay with nesting and metadata") {
  fresh_fake();
  Profiler prof;
  std::vector<ReplayReport> sunk;
  prof.add_sink([&](const ReplayReport& r) { sunk.push_back(r); });
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);

  graph.capture_begin(stream);
  {
    auto outer = prof.region(stream, "outer", {{"bytes", "4096"}});
    stream.delay(100ns);
    {
      auto inner = prof.region(stream, "inner", {{"kind", "mm"}});
      stream.delay(200ns);
    }
    stream.delay(50ns);
  }
  prof.begin(stream, "tail");
  stream.delay(7ns);
  prof.end(stream);
  graph.capture_end();

  for (int i = 0; i < 3; ++i) graph.replay();
  CHECK(prof.delivered() == 0);  // lazy: nothing has run on the fake device yet
  prof.flush();
  REQUIRE(prof.delivered() == 3);
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 3);
  REQUIRE(sunk.size() == 3);
  for (uint64_t i = 0; i < 3; ++i) {
    const ReplayReport& r = reports[i];
    CHECK(r.graph_id() == graph.id());
    CHECK(r.replay_index() == i);
    CHECK(sunk[i].replay_index() == i);
    CHECK(r.backend() == kFake);
    CHECK(r.device() == 0);
    CHECK(r.device_name() == "fake device");
    CHECK(r.marker_strategy() == "fake-ts");
    CHECK(r.resolution_ns() == 1);
    REQUIRE(r.size() == 3);
    const RegionTiming& outer = r.region(0);
    const RegionTiming& inner = r.region(1);
    const RegionTiming& tail = r.region(2);
    CHECK(outer.name() == "outer");
    CHECK(outer.path() == "outer");
    CHECK(outer.depth() == 0);
    CHECK(outer.parent() == -1);
    CHECK(outer.duration_ns() == 350);
    CHECK(outer.end_ns() - outer.start_ns() == 350);
    CHECK(outer.metadata() == Metadata{{"bytes", "4096"}});
    CHECK(inner.path() == "outer/inner");
    CHECK(inner.depth() == 1);
    CHECK(inner.parent() == 0);
    CHECK(inner.duration_ns() == 200);
    CHECK(inner.start_ns() - outer.start_ns() == 100);
    CHECK(inner.metadata() == Metadata{{"kind", "mm"}});
    CHECK(tail.depth() == 0);
    CHECK(tail.duration_ns() == 7);
    CHECK(outer.stream_id() == stream.id());
  }
  // Replays run one after another on the device clock.
  CHECK(reports[1].region(0).start_ns() - reports[0].region(0).start_ns() == 357);
  CHECK(counters.violations.load() == 0);

  std::vector<RegionStats> stats = prof.stats();
  REQUIRE(stats.size() == 3);
  CHECK(stats[0].path == "outer");
  CHECK(stats[0].count == 3);
  CHECK(stats[0].mean_ns == 350);
  CHECK(stats[1].path == "outer/inner");
  CHECK(stats[1].depth == 1);
}

TEST_CASE("adjacent sibling regions share their boundary marker (Note [Boundary sharing])") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  for (int i = 0; i < 3; ++i) {
    auto r = prof.region(stream, "layer" + std::to_string(i));
    stream.delay(std::chrono::nanoseconds(10 * (i + 1)));
  }
  graph.capture_end();
  CHECK(counters.records.load() == 4);  // 3 regions, 4 markers
  graph.replay();
  prof.flush();
  ReplayReport r = prof.reports().at(0);
  REQUIRE(r.size() == 3);
  CHECK(r.region(0).end_ns() == r.region(1).start_ns());
  CHECK(r.region(1).end_ns() == r.region(2).start_ns());
  CHECK(r.region(0).duration_ns() == 10);
  CHECK(r.region(1).duration_ns() == 20);
  CHECK(r.region(2).duration_ns() == 30);
}

TEST_CASE("an accgraph operation between siblings gets its own boundary; nesting shares") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  prof.begin(stream, "a");
  stream.delay(10ns);
  prof.end(stream);
  stream.delay(70ns);  // between the siblings: not part of either
  prof.begin(stream, "b");
  prof.begin(stream, "b1");  // first child: begins with its parent, on its marker
  stream.delay(5ns);
  prof.end(stream);
  prof.end(stream);
  graph.capture_end();
  CHECK(counters.records.load() == 4);  // a: 2; b and b1 begin and end together: 2
  graph.replay();
  prof.flush();
  ReplayReport r = prof.reports().at(0);
  CHECK(find_region(r, "b").start_ns() - find_region(r, "a").end_ns() == 70);
  CHECK(find_region(r, "b/b1").duration_ns() == 5);
  CHECK(find_region(r, "b").duration_ns() == 5);
  CHECK(find_region(r, "b/b1").start_ns() == find_region(r, "b").start_ns());
}

TEST_CASE("a ring of depth 2 with 20 replays delivers 20 reports in order, none lost") {
  fresh_fake();
  ProfilerOptions options;
  options.ring_depth = 2;
  Profiler prof(options);
  std::vector<uint64_t> order;
  prof.add_sink([&](const ReplayReport& r) { order.push_back(r.replay_index()); });
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "work", 25ns);
  for (int i = 0; i < 20; ++i) graph.replay();
  // Each launch with a full ring first collected the oldest: 18 delivered, 2 in flight.
  CHECK(prof.delivered() == 18);
  CHECK(counters.max_unread.load() == 2);
  prof.flush();
  CHECK(prof.delivered() == 20);
  REQUIRE(order.size() == 20);
  for (uint64_t i = 0; i < 20; ++i) CHECK(order[i] == i);
  for (const ReplayReport& r : prof.reports()) CHECK(r.region(0).duration_ns() == 25);
  CHECK(counters.violations.load() == 0);
}

TEST_CASE("a sink that flushes from inside its call sees its own report unchanged") {
  // The profiler reuses one report per graph between deliveries; a nested delivery (a sink
  // calling flush()) must not rewrite the report the outer sink is still reading.
  fresh_fake();
  ProfilerOptions options;
  options.ring_depth = 4;
  options.keep_reports = 0;
  Profiler prof(options);
  std::vector<uint64_t> seen_before, seen_after;
  int depth = 0;
  prof.add_sink([&](const ReplayReport& r) {
    uint64_t index = r.replay_index();
    seen_before.push_back(index);
    if (depth++ == 0) prof.flush();  // delivers the other pending replays, nested
    --depth;
    seen_after.push_back(r.replay_index());
    CHECK(r.replay_index() == index);
    CHECK(r.region(0).name() == "work");
  });
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "work", 25ns);
  for (int i = 0; i < 3; ++i) graph.replay();
  prof.flush();
  CHECK(prof.delivered() == 3);
  CHECK(seen_before == std::vector<uint64_t>{0, 1, 2});
  CHECK(seen_after == std::vector<uint64_t>{1, 2, 0});
}

// audit 2026-11-28 F06: a sink that replays the graph it gets a report of (or opens an eager
// region) made flush() collect forever (Note [Bounded collection] in timing/engine/collector.cpp).
TEST_CASE("flush() delivers what was pending when it began, not what its sinks launch") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "work", 25ns);
  int calls = 0;  // bounded, so that a flush that chases the sinks fails instead of hanging
  prof.add_sink([&](const ReplayReport& r) {
    if (++calls > 1000) return;
    if (r.graph_id() == graph.id()) {
      graph.replay();
    } else {
      Profiler::Region region = prof.region(stream, "in the sink");
    }
  });
  graph.replay();
  { Profiler::Region eager = prof.region(stream, "eager"); }
  prof.flush();
  CHECK(prof.delivered() == 2);  // the replay and the eager region
  prof.flush();
  CHECK(prof.delivered() == 4);  // what the sinks launched during the first flush
  CHECK(calls == 4);
}

TEST_CASE("immediate delivery reports each replay before replay() returns") {
  fresh_fake();
  ProfilerOptions options;
  options.delivery = Delivery::Immediate;
  Profiler prof(options);
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "step", 3ns);
  for (uint64_t i = 0; i < 5; ++i) {
    graph.replay();
    CHECK(prof.delivered() == i + 1);
    CHECK(prof.reports().back().replay_index() == i);
  }
  CHECK(counters.max_unread.load() == 1);
}

TEST_CASE("regions on a forked stream land in the same report with their stream id") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream main_stream = Stream::create(kFake);
  Stream side = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(main_stream);
  side.wait(main_stream);  // fork
  {
    auto r = prof.region(side, "side");
    side.delay(30ns);
  }
  {
    auto r = prof.region(main_stream, "main");
    main_stream.delay(40ns);
  }
  main_stream.wait(side);  // join
  graph.capture_end();
  graph.replay();
  graph.replay();
  prof.flush();
  REQUIRE(prof.reports().size() == 2);
  ReplayReport r = prof.reports()[1];
  CHECK(r.replay_index() == 1);
  CHECK(find_region(r, "side").stream_id() == side.id());
  CHECK(find_region(r, "side").depth() == 0);
  CHECK(find_region(r, "side").duration_ns() == 30);
  CHECK(find_region(r, "main").stream_id() == main_stream.id());
  CHECK(find_region(r, "main").duration_ns() == 40);
  CHECK(counters.violations.load() == 0);
}

TEST_CASE("attach_all times graphs it was not told about; detach stops new captures") {
  fresh_fake();
  Profiler prof;
  prof.attach_all();
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  graph.capture_begin(stream);
  prof.begin(stream, "r");
  stream.delay(1ns);
  prof.end(stream);
  graph.capture_end();
  graph.replay();

  prof.detach();
  graph.replay();  // the capture made while attached still reports
  prof.flush();
  CHECK(prof.delivered() == 2);

  AcceleratorGraph other(kFake);
  other.capture_begin(stream);
  require_error([&] { prof.begin(stream, "late"); }, ErrorCode::InvalidState,
                ErrorReason::UnattachedCapture,
                {"not attached", "call attach(graph) or attach_all() before capture_begin"});
  other.capture_end();
}

TEST_CASE("a capture without regions reports nothing") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  stream.delay(5ns);
  graph.capture_end();
  for (int i = 0; i < 10; ++i) graph.replay();
  prof.flush();
  CHECK(prof.delivered() == 0);
  CHECK(counters.records.load() == 0);
  // Note [Deferred ring]: no marker storage, no begin_sequence, nothing on the replay path.
  CHECK(counters.markers_created.load() == 0);
  CHECK(counters.sequences_begun.load() == 0);
  CHECK(graph.replay_hooks() == 0);
}

// --- boundary sharing and the deferred ring -----------------------------------------------------

// Note [Boundary sharing] on a native stream (wrapped): the capture tail token decides.
TEST_CASE("a native capturing stream shares a boundary only where its capture tail is unchanged") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  int handle = 0;
  Stream stream = Stream::wrap(kFake, 0, &handle);
  prof.attach(graph);
  graph.capture_begin(stream);
  counters.tail = 5;
  prof.begin(stream, "P");
  prof.begin(stream, "C1");  // same token: shares P's begin
  CHECK(counters.records == 1);
  prof.end(stream);          // never its own begin marker
  prof.begin(stream, "C2");  // same token: shares C1's end
  CHECK(counters.records == 2);
  prof.end(stream);
  counters.tail = 6;  // native work came: the token changed
  prof.end(stream);   // P's end does not share C2's end
  CHECK(counters.records == 4);
  counters.tail = 0;  // the backend cannot tell: no marker recorded from now on is shared
  prof.begin(stream, "Q");
  prof.end(stream);
  prof.begin(stream, "R");
  prof.end(stream);
  CHECK(counters.records == 8);
  graph.capture_end();
  CHECK(counters.tail_queries > 0);
  graph.replay();
  prof.flush();
  const ReplayReport r = prof.reports().at(0);
  const ReportLayout& layout = r.layout();
  auto info = [&](const std::string& path) {
    auto found = std::find_if(layout.regions().begin(), layout.regions().end(),
                              [&](const RegionInfo& i) { return i.path == path; });
    REQUIRE(found != layout.regions().end());
    return *found;
  };
  CHECK(info("P").begin_marker == info("P/C1").begin_marker);
  CHECK(info("P/C1").end_marker == info("P/C2").begin_marker);
  CHECK(info("P/C2").end_marker != info("P").end_marker);
  CHECK(info("Q").begin_marker != info("P").end_marker);
  CHECK(info("R").begin_marker != info("Q").end_marker);
  CHECK(layout.marker_count() == 8);
}

TEST_CASE(
    "a stream not native never asks for the capture tail; one eager and native never shares") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  counters.tail = 5;
  graph.capture_begin(stream);
  {
    auto outer = prof.region(stream, "outer");
    auto inner = prof.region(stream, "inner");
    stream.delay(3ns);
  }
  graph.capture_end();
  CHECK(counters.records == 2);  // the operation count alone decides: shared begin and end
  CHECK(counters.tail_queries == 0);

  int handle = 0;
  Stream native = Stream::wrap(kFake, 0, &handle);
  counters.records = 0;
  {
    auto outer = prof.region(native, "outer");
    auto inner = prof.region(native, "inner");
    native.delay(3ns);
  }
  CHECK(counters.records == 4);  // eager: the token is no proof, every boundary its own marker
  prof.flush();
}

TEST_CASE("a capture forked before its first region begins its marker sequence before the fork") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream main_stream = Stream::create(kFake);
  Stream side = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(main_stream);
  CHECK(counters.markers_created == 0);
  side.wait(main_stream);  // fork: the head of the sequence goes first, on main_stream
  CHECK(counters.markers_created == 1);
  CHECK(counters.sequences_begun == 1);
  CHECK(counters.forks_at_begin == 0);
  CHECK(counters.records_at_begin == 0);
  {
    auto r = prof.region(side, "side");
    side.delay(30ns);
  }
  Stream third = Stream::create(kFake);
  third.wait(main_stream);  // a second fork begins nothing more
  main_stream.wait(side);
  main_stream.wait(third);
  graph.capture_end();
  CHECK(counters.sequences_begun == 1);
  for (int i = 0; i < 3; ++i) graph.replay();
  prof.flush();
  CHECK(prof.delivered() == 3);
  CHECK(find_region(prof.reports().back(), "side").duration_ns() == 30);
  CHECK(counters.violations == 0);
  CHECK(counters.begin_stream.load() == main_stream.native_handle());
}

TEST_CASE("a capture that forks but records no region replays its empty sequence, reports none") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream main_stream = Stream::create(kFake);
  Stream side = Stream::create(kFake);
  prof.attach(graph);
  const int alive_before = counters.markers_alive.load();
  graph.capture_begin(main_stream);
  side.wait(main_stream);
  side.delay(5ns);
  main_stream.wait(side);
  graph.capture_end();
  CHECK(counters.sequences_begun == 1);
  CHECK(counters.markers_alive.load() == alive_before + 1);
  CHECK(graph.replay_hooks() == 1);            // its sequences are numbered and waited for
  for (int i = 0; i < 9; ++i) graph.replay();  // more than the ring's depth, never waiting
  prof.flush();
  CHECK(prof.delivered() == 0);  // its sequences hold no marker: nothing is read or reported
  graph.reset();                 // waits for the last launch, then frees the storage
  CHECK(counters.markers_alive.load() == alive_before);
}

TEST_CASE("the first region after the first fork and the first region before it: one sequence") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream main_stream = Stream::create(kFake);
  Stream side = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(main_stream);
  {
    auto r = prof.region(main_stream, "first");
    CHECK(counters.sequences_begun == 1);
    CHECK(counters.records_at_begin == 0);  // before the region's first marker
    main_stream.delay(10ns);
  }
  side.wait(main_stream);
  {
    auto r = prof.region(side, "side");
    side.delay(20ns);
  }
  main_stream.wait(side);
  graph.capture_end();
  CHECK(counters.sequences_begun == 1);
  CHECK(counters.markers_created == 1);
  graph.replay();
  prof.flush();
  REQUIRE(prof.delivered() == 1);
  CHECK(find_region(prof.reports()[0], "first").duration_ns() == 10);
  CHECK(find_region(prof.reports()[0], "side").duration_ns() == 20);
}

TEST_CASE("a marker ring that cannot be made fails the first region or fork, not the capture") {
  fresh_fake();
  ProfilerOptions bad;
  bad.marker_strategy = "no_such_strategy";
  Profiler prof(bad);
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  Stream side = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);  // nothing made yet
  require_error([&] { prof.begin(stream, "r"); }, ErrorCode::Unsupported,
                {"begin: making the marker ring of graph", "no_such_strategy",
                 "the capture goes on untimed so far", "begin the region again"});
  require_error([&] { side.wait(stream); }, ErrorCode::Unsupported,
                {"fork: making the marker ring of graph", "fork again"});
  CHECK_FALSE(side.is_capturing());
  CHECK(graph.state() == GraphState::Capturing);
  stream.delay(5ns);
  graph.capture_end();
  graph.replay();
  prof.flush();
  CHECK(prof.delivered() == 0);
  CHECK(counters.markers_created == 0);
}

TEST_CASE("a failed begin_sequence leaves the capture usable; the next region begins it") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  counters.fail_begins = 1;
  require_error([&] { prof.begin(stream, "r"); }, ErrorCode::BackendError,
                {"begin_sequence failed"});
  CHECK(graph.state() == GraphState::Capturing);
  {
    auto r = prof.region(stream, "r");
    stream.delay(7ns);
  }
  graph.capture_end();
  CHECK(counters.markers_created == 1);  // the ring made for the failed attempt, reused
  CHECK(counters.sequences_begun == 1);
  graph.replay();
  prof.flush();
  REQUIRE(prof.delivered() == 1);
  CHECK(prof.reports()[0].region(0).duration_ns() == 7);

  // A capture whose only attempt failed: no report, and flush does not wait for it.
  AcceleratorGraph other(kFake);
  prof.attach(other);
  other.capture_begin(stream);
  counters.fail_begins = 1;
  require_error([&] { prof.begin(stream, "r"); }, ErrorCode::BackendError,
                {"begin_sequence failed"});
  other.capture_end();
  CHECK(other.replay_hooks() == 0);
  other.replay();
  prof.flush();
  CHECK(prof.delivered() == 1);
}

// --- eager regions -------------------------------------------------------------------------------

TEST_CASE("eager regions: one report per outermost region tree, graph id 0") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  {
    auto a = prof.region(stream, "eager", {{"k", "v"}});
    stream.delay(100ns);
    {
      auto b = prof.region(stream, "child");
      stream.delay(40ns);
    }
    {
      auto c = prof.region(stream, "child2");  // adjacent sibling: shares the boundary
      stream.delay(60ns);
    }
  }
  CHECK(prof.delivered() == 0);  // lazy: nothing waited for
  {
    auto again = prof.region(stream, "eager");
    stream.delay(9ns);
  }
  prof.flush();
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].graph_id() == 0);
  CHECK(reports[0].replay_index() == 0);
  CHECK(reports[1].replay_index() == 1);
  REQUIRE(reports[0].size() == 3);
  CHECK(reports[0].region(0).duration_ns() == 200);
  CHECK(reports[0].region(0).metadata() == Metadata{{"k", "v"}});
  CHECK(reports[0].region(1).path() == "eager/child");
  CHECK(reports[0].region(1).duration_ns() == 40);
  CHECK(reports[0].region(1).end_ns() == reports[0].region(2).start_ns());
  CHECK(reports[0].region(2).duration_ns() == 60);
  CHECK(reports[1].size() == 1);
  CHECK(reports[1].region(0).duration_ns() == 9);
  // First tree: eager begin, child begin, child end = child2 begin, child2 end = eager end;
  // second tree: 2 (Note [Boundary sharing]).
  CHECK(counters.records.load() == 6);
  CHECK(counters.markers_created.load() == 1);  // one marker set per stream, reused
  CHECK(counters.violations.load() == 0);
}

TEST_CASE("zero-copy reports: read() writes into the report's own times, sinks get no copy") {
  // Timing layer v2: TimestampMarkers::read fills the caller's span, which is the storage of
  // the report the sinks receive (shared layout + that replay's times: no RegionTiming and no
  // string is copied to deliver it); kept reports are that same storage, moved.
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  std::vector<const uint64_t*> sunk_times;
  std::vector<const ReportLayout*> sunk_layouts;
  prof.add_sink([&](const ReplayReport& r) {
    CHECK(r.marker_times().data() == counters.last_read.load());  // read straight into it
    sunk_times.push_back(r.marker_times().data());
    sunk_layouts.push_back(&r.layout());
  });
  auto tree = [&](int children, std::chrono::nanoseconds step) {
    auto root = prof.region(stream, "root");
    for (int i = 0; i < children; ++i) {
      auto child = prof.region(stream, "child");
      stream.delay(step);
    }
  };
  tree(1, 5ns);  // 2 markers
  prof.flush();
  tree(1, 6ns);
  tree(100, 2ns);  // 101 markers
  tree(1, 7ns);
  tree(3, 1ns);
  prof.flush();
  CHECK(counters.markers_created.load() == 1);  // one marker set: one stream
  CHECK(counters.violations.load() == 0);

  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 5);
  REQUIRE(sunk_times.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(&reports[i].layout() == sunk_layouts[i]);  // shared
  CHECK(reports[0].region(0).duration_ns() == 5);
  CHECK(reports[1].region(0).duration_ns() == 6);
  REQUIRE(reports[2].size() == 101);
  CHECK(reports[2].region(0).duration_ns() == 200);
  CHECK(reports[2].region(100).duration_ns() == 2);
  CHECK(reports[2].region(99).end_ns() == reports[2].region(100).start_ns());
  REQUIRE(reports[3].size() == 2);
  CHECK(reports[3].region(0).duration_ns() == 7);
  REQUIRE(reports[4].size() == 4);
  CHECK(reports[4].region(0).duration_ns() == 3);
  for (const RegionTiming& child : reports[4].regions())
    if (child.path() == "root/child") CHECK(child.duration_ns() == 1);
}

TEST_CASE("eager regions respect the ring too, and immediate delivery") {
  fresh_fake();
  ProfilerOptions options;
  options.ring_depth = 2;
  Profiler prof(options);
  int sink_calls = 0;
  prof.add_sink([&](const ReplayReport&) { ++sink_calls; });
  Stream stream = Stream::create(kFake);
  for (int i = 0; i < 7; ++i) {
    const int before = sink_calls;
    auto r = prof.region(stream, "e");
    CHECK(sink_calls ==
          before);  // opening a region never delivers (Note [Recording never delivers])
    stream.delay(1ns);
  }
  // Each tree that fills the ring makes room as it closes, for the next one: one slot stays free.
  CHECK(prof.delivered() == 6);
  CHECK(sink_calls == 6);
  prof.flush();
  CHECK(prof.delivered() == 7);
  CHECK(counters.violations.load() == 0);

  ProfilerOptions immediate;
  immediate.delivery = Delivery::Immediate;
  Profiler prof2(immediate);
  Stream stream2 = Stream::create(kFake);
  prof2.begin(stream2, "x");
  stream2.delay(4ns);
  prof2.end(stream2);
  CHECK(prof2.delivered() == 1);
  CHECK(prof2.reports().at(0).region(0).duration_ns() == 4);
}

// --- errors --------------------------------------------------------------------------------------

TEST_CASE("a region in the capture of a graph the profiler is not attached to is an error") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  graph.capture_begin(stream);
  require_error([&] { prof.begin(stream, "layer"); }, ErrorCode::InvalidState,
                ErrorReason::UnattachedCapture,
                {"begin('layer')", "graph " + std::to_string(graph.id()), "not attached",
                 "call attach(graph) or attach_all() before capture_begin"});
  graph.capture_end();
  graph.replay();
  prof.flush();
  CHECK(prof.delivered() == 0);

  // Attaching during a capture cannot time it.
  AcceleratorGraph late(kFake);
  late.capture_begin(stream);
  require_error([&] { prof.attach(late); }, ErrorCode::InvalidState,
                {"already capturing", "attach before capture_begin"});
  late.reset();
}

TEST_CASE("an open region at capture_end is an error; the graph is reset and reusable") {
  fresh_fake();
  Profiler prof;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  prof.begin(stream, "outer");
  prof.begin(stream, "inner");
  require_error([&] { graph.capture_end(); }, ErrorCode::InvalidState,
                {"region", "'outer/inner'", "still open", "end every region before capture_end"});
  CHECK(graph.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  // The aborted capture's regions are gone: an end() says so (CaptureEnded, as a Region's
  // does: audit R07), for each of them, then that none is open.
  for (int i = 0; i < 2; ++i)
    require_error([&] { prof.end(stream); }, ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                  {"was begun in a capture that was aborted or reset"});
  require_error([&] { prof.end(stream); }, ErrorCode::InvalidState, ErrorReason::RegionOrder,
                {"no region is open"});

  capture_one_region(graph, stream, prof, "ok", 11ns);
  graph.replay();
  prof.flush();
  REQUIRE(prof.delivered() == 1);
  CHECK(prof.reports()[0].region(0).path() == "ok");
  CHECK(prof.reports()[0].region(0).duration_ns() == 11);
  CHECK(prof.reports()[0].replay_index() == 0);
}

TEST_CASE("misuse of begin and end is reported with what to do") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  require_error([&] { prof.end(stream); }, ErrorCode::InvalidState,
                {"no region is open on stream", "call begin(stream, name) first"});
  require_error([&] { prof.begin(stream, ""); }, ErrorCode::InvalidArgument,
                {"region name is empty"});

  // A region opened eagerly cannot span a capture on its stream.
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  prof.begin(stream, "eager_open");
  require_error([&] { graph.capture_begin(stream); }, ErrorCode::InvalidState,
                {"region 'eager_open' is open eagerly", "end it before graph"});
  CHECK(graph.state() == GraphState::Empty);
  CHECK_FALSE(stream.is_capturing());
  prof.end(stream);
  prof.flush();
  CHECK(prof.delivered() == 1);

  ProfilerOptions bad;
  bad.marker_strategy = "no_such_strategy";
  Profiler bad_prof(bad);
  require_error([&] { bad_prof.begin(stream, "x"); }, ErrorCode::Unsupported, {"no_such_strategy"});
}

// --- lifecycle -----------------------------------------------------------------------------------

TEST_CASE("the destructor delivers pending reports") {
  fresh_fake();
  std::vector<uint64_t> order;
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  {
    Profiler prof;
    prof.add_sink([&](const ReplayReport& r) { order.push_back(r.replay_index()); });
    prof.attach(graph);
    capture_one_region(graph, stream, prof, "r", 2ns);
    for (int i = 0; i < 3; ++i) graph.replay();
    CHECK(order.empty());
  }
  CHECK(order == std::vector<uint64_t>{0, 1, 2});
  // The graph outlives the profiler and still replays safely (its markers were kept).
  graph.replay();
  stream.synchronize();
}

TEST_CASE("reset and destruction of a graph collect its pending reports first") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "first", 3ns);
  graph.replay();
  graph.replay();
  CHECK(prof.delivered() == 0);
  graph.reset();
  CHECK(prof.delivered() == 2);
  capture_one_region(graph, stream, prof, "second", 3ns);  // still attached after a reset
  graph.replay();
  prof.flush();
  REQUIRE(prof.delivered() == 3);
  CHECK(prof.reports()[2].region(0).path() == "second");
  CHECK(prof.reports()[2].replay_index() == 0);  // counted from the new capture
  // Kept reports of the first capture still describe it after the graph was re-captured.
  CHECK(prof.reports()[0].region(0).path() == "first");
  CHECK(prof.reports()[1].region(0).path() == "first");
  CHECK(prof.reports()[1].replay_index() == 1);
  CHECK(prof.reports()[1].region(0).duration_ns() == 3);

  {
    AcceleratorGraph temporary(kFake);
    prof.attach(temporary);
    capture_one_region(temporary, stream, prof, "temporary", 3ns);
    temporary.replay();
  }
  CHECK(prof.delivered() == 4);
  CHECK(prof.reports()[3].region(0).path() == "temporary");
  CHECK(counters.violations.load() == 0);
}

TEST_CASE("keep_reports off still counts, feeds stats and sinks") {
  fresh_fake();
  ProfilerOptions options;
  options.keep_reports = 0;
  Profiler prof(options);
  int sunk = 0;
  prof.add_sink([&](const ReplayReport&) { ++sunk; });
  Stream stream = Stream::create(kFake);
  for (int i = 0; i < 4; ++i) {
    auto r = prof.region(stream, "e");
    stream.delay(8ns);
  }
  prof.flush();
  CHECK(prof.delivered() == 4);
  CHECK(sunk == 4);
  CHECK(prof.reports().empty());
  REQUIRE(prof.stats().size() == 1);
  CHECK(prof.stats()[0].count == 4);
  CHECK(prof.stats()[0].max_ns == 8);
}

std::vector<std::string> logged;
void capture_log(accgraph::LogLevel, const char* message, void*) { logged.push_back(message); }

TEST_CASE("a throwing sink is logged and does not stop delivery to the others") {
  fresh_fake();
  logged.clear();
  accgraph::set_log_handler(capture_log);
  {
    Profiler prof;
    int second = 0;
    prof.add_sink([](const ReplayReport&) { throw std::runtime_error("sink broke"); });
    prof.add_sink([&](const ReplayReport&) { ++second; });
    Stream stream = Stream::create(kFake);
    prof.begin(stream, "e");
    prof.end(stream);
    prof.flush();
    CHECK(second == 1);
    CHECK(prof.delivered() == 1);
  }
  accgraph::set_log_handler(nullptr);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("sink threw") != std::string::npos);
  CHECK(logged[0].find("sink broke") != std::string::npos);
}

TEST_CASE("the background collector delivers finished replays without flush") {
  fresh_fake();
  ProfilerOptions options;
  options.background_collector = true;
  options.collector_period = 100us;
  Profiler prof(options);
  AcceleratorGraph graph(kFake);
  Stream stream = Stream::create(kFake);
  prof.attach(graph);
  capture_one_region(graph, stream, prof, "bg", 6ns);
  for (int i = 0; i < 3; ++i) graph.replay();
  std::this_thread::sleep_for(5ms);
  CHECK(prof.delivered() == 0);  // the fake device has not run them: nothing is complete
  stream.synchronize();          // now it has
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (prof.delivered() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(prof.delivered() == 3);
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 3);
  for (uint64_t i = 0; i < 3; ++i) CHECK(reports[i].replay_index() == i);
}

// --- the host backend ------------------------------------------------------------------------

// Review 3.4 bug 2 (issue "Timing layer v2" item 2): Region::end() used to end the innermost
// region of its stream, so a.end() with b open silently swapped their timings. Audit 2026-12-07
// R12: the refused region then stayed open, and every later region nested in it unreported; now
// it is dropped (Note [Regions out of order]).
TEST_CASE("a Region ends its own region: out of order it is dropped with an error, nothing swaps") {
  fresh_fake();
  Stream stream = Stream::create(kFake);
  Profiler prof;
  {
    std::optional<Profiler::Region> a(prof.region(stream, "a"));
    std::optional<Profiler::Region> b(prof.region(stream, "b"));
    stream.delay(std::chrono::nanoseconds(2000));
    require_error([&] { a->end(); }, ErrorCode::InvalidState, ErrorReason::RegionOrder,
                  {fmt::format("region 'a' on stream {} is not the innermost open region: "
                               "'a/b' began after it and is still open, so 'a' is dropped and "
                               "not reported",
                               stream.id())});
    CHECK_FALSE(a->is_open());  // dropped: nothing left to end
    stream.delay(std::chrono::nanoseconds(5000));
    b->end();
    CHECK_FALSE(b->is_open());
    a->end();  // nothing happens
    { auto c = prof.region(stream, "c"); stream.delay(std::chrono::nanoseconds(100)); }
  }
  prof.flush();
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 2);
  REQUIRE(reports[0].size() == 1);
  CHECK(find_region(reports[0], "b").duration_ns() == 7000);
  CHECK(find_region(reports[1], "c").duration_ns() == 100);

  // A region whose capture was reset is no longer open: its end says so instead of ending
  // whatever is innermost on the stream.
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  std::optional<Profiler::Region> lost(prof.region(stream, "lost"));
  graph.reset();
  graph.capture_begin(stream);
  auto other = prof.region(stream, "other");
  CHECK(lost->is_open());  // not known before end() looks
  require_error([&] { lost->end(); }, ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                {"the region is no longer open"});
  CHECK_FALSE(lost->is_open());
  lost->end();  // closed after that: nothing more happens
  other.end();
  graph.capture_end();
}

// Audit 5.2 (profiler side): a marker the backend cannot place (a wrapped counter) makes the
// regions that use it unmeasurable, never a wrong duration, and keeps them out of the statistics.
TEST_CASE("a marker read back as kUnmeasurable makes its regions unmeasurable") {
  fresh_fake();
  Stream stream = Stream::create(kFake);
  Profiler prof;
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  {
    auto a = prof.region(stream, "a");  // markers 0, 1
    stream.delay(std::chrono::nanoseconds(100));
  }
  {
    auto b = prof.region(stream, "b");  // shares marker 1, ends at 2
    stream.delay(std::chrono::nanoseconds(200));
  }
  graph.capture_end();
  graph.replay();
  prof.flush();
  counters.unmeasurable_marker = 2;
  graph.replay();
  graph.replay();
  prof.flush();
  std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 3);
  CHECK(reports[0].region(1).measurable());
  CHECK(reports[0].region(1).duration_ns() == 200);
  for (size_t i = 1; i < 3; ++i) {
    CHECK(reports[i].region(0).measurable());
    CHECK(reports[i].region(0).duration_ns() == 100);
    CHECK_FALSE(reports[i].region(1).measurable());
    CHECK(reports[i].region(1).duration_ns() == 0);
    CHECK(reports[i].region(1).start_ns() == 0);
  }
  std::vector<RegionStats> stats = prof.stats();
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].count == 3);
  CHECK(stats[0].unmeasurable == 0);
  CHECK(stats[1].count == 1);
  CHECK(stats[1].unmeasurable == 2);
  CHECK(stats[1].max_ns == 200);
}

// Audit 2.2: per-stream state (the stack, the eager marker set and its backend storage) was
// never released, so memory and flush() time grew with every short-lived stream.
TEST_CASE("a destroyed stream's eager reports are delivered and its marker set released") {
  fresh_fake();
  Profiler prof;
  const int alive_before = counters.markers_alive.load();
  for (int i = 0; i < 50; ++i) {
    Stream stream = Stream::create(kFake);
    {
      auto r = prof.region(stream, "short");
      stream.delay(std::chrono::nanoseconds(10));
    }
    CHECK(counters.markers_alive.load() == alive_before + 1);
  }
  // Delivered when each stream died, not only at flush.
  CHECK(prof.delivered() == 50);
  CHECK(counters.markers_alive.load() == alive_before);
  CHECK(counters.violations == 0);
  prof.flush();
  CHECK(prof.delivered() == 50);

  // A region still open when its stream dies: dropped, and the Region says why.
  std::optional<Profiler::Region> open;
  {
    Stream stream = Stream::create(kFake);
    open.emplace(prof.region(stream, "open"));
  }
  CHECK(counters.markers_alive.load() == alive_before);
  CHECK_ACCGRAPH_ERROR(open->end(), ErrorCode::InvalidState,
                       "the stream this region was opened on was destroyed before the region "
                       "ended");
  open->end();  // once reported, the region is closed
}

// Issue "Timing layer v2" item 5: the marker storage of a graph that outlives its profiler was
// leaked on purpose until the process exited; the graph now keeps it until it drops the capture.
TEST_CASE("a graph that outlives its profiler keeps the marker storage until reset or destroyed") {
  fresh_fake();
  Stream stream = Stream::create(kFake);
  const int alive_before = counters.markers_alive.load();
  AcceleratorGraph graph(kFake);
  {
    auto kept = std::make_unique<AcceleratorGraph>(kFake);
    {
      Profiler prof;
      prof.attach(graph);
      prof.attach(*kept);
      capture_one_region(graph, stream, prof, "r", std::chrono::nanoseconds(10));
      capture_one_region(*kept, stream, prof, "r", std::chrono::nanoseconds(10));
      graph.replay();
      CHECK(counters.markers_alive.load() == alive_before + 2);
    }
    CHECK(counters.markers_alive.load() == alive_before + 2);  // still written by replays
    graph.replay();
    kept->replay();
    stream.synchronize();
    CHECK(counters.violations == 0);
  }
  CHECK(counters.markers_alive.load() == alive_before + 1);  // destroyed with its graph
  graph.reset();
  CHECK(counters.markers_alive.load() == alive_before);  // released with the capture
  graph.capture_begin(stream);                           // the graph is reusable
  graph.capture_end();
  graph.replay();
  stream.synchronize();
}

// Audit 2.19: a Region destroyed after its Profiler used the freed profiler.
TEST_CASE("a Region that outlives its Profiler reports it instead of using it") {
  fresh_fake();
  Stream stream = Stream::create(kFake);
  auto prof = std::make_unique<Profiler>();
  std::optional<Profiler::Region> region;
  region.emplace(prof->region(stream, "outlives"));
  prof.reset();
  CHECK_ACCGRAPH_ERROR(region->end(), ErrorCode::InvalidState,
                       "the Profiler this region was opened with was destroyed before the region "
                       "ended");
  CHECK_FALSE(region->is_open());
  region.reset();  // the destructor does nothing more (and never throws)

  // Its destructor alone logs instead of crashing.
  auto second = std::make_unique<Profiler>();
  {
    auto r = second->region(stream, "outlives too");
    second.reset();
  }
  stream.synchronize();
}

// A Region is a handle to the stream's queue: moving the Stream object does not break it.
TEST_CASE("a Region survives its Stream object being moved") {
  fresh_fake();
  Profiler prof;
  std::vector<Stream> streams;
  streams.push_back(Stream::create(kFake));
  {
    auto r = prof.region(streams[0], "moved");
    for (int i = 0; i < 8; ++i) streams.push_back(Stream::create(kFake));
    streams[0].delay(std::chrono::nanoseconds(500));
  }
  prof.flush();
  REQUIRE(prof.reports().size() == 1);
  CHECK(prof.reports()[0].region(0).duration_ns() == 500);
}

// Audit 2.16 / 2.17: a timed graph replayed into another graph's capture made flush() hang (the
// outer graph never ran) or lost reports and read other executions' slots.
TEST_CASE("a timed graph cannot be replayed into another capture; the outer capture goes on") {
  for (const char* backend : {kFake, "host"}) {
    CAPTURE(backend);
    fresh_fake();
    Stream stream = Stream::create(backend);
    Stream outer_stream = Stream::create(backend);
    Profiler prof;
    AcceleratorGraph inner(backend);
    prof.attach(inner);
    capture_one_region(inner, stream, prof, "inner", std::chrono::microseconds(5));
    AcceleratorGraph outer(backend);
    outer.capture_begin(outer_stream);
    CHECK_ACCGRAPH_ERROR(inner.replay(outer_stream), ErrorCode::InvalidState,
                         fmt::format("replay: graph {} is timed by a profiler and stream {} is "
                                     "capturing into graph {}: a timed graph cannot be replayed "
                                     "into another capture",
                                     inner.id(), outer_stream.id(), outer.id()));
    CHECK(outer_stream.is_capturing());
    outer.capture_end();
    for (int i = 0; i < 3; ++i) outer.replay();
    for (int i = 0; i < 5; ++i) inner.replay();
    prof.flush();  // returns: nothing pending that cannot run
    std::vector<ReplayReport> reports = prof.reports();
    REQUIRE(reports.size() == 5);
    for (uint64_t i = 0; i < 5; ++i) {
      CHECK(reports[i].replay_index() == i);
      CHECK(reports[i].region(0).raw_duration_ns() >= 5000);
    }
    CHECK(inner.replay_count() == 5);

    // Untimed graphs still nest where the backend can.
    AcceleratorGraph untimed(backend);
    untimed.capture_begin(stream);
    stream.delay(std::chrono::microseconds(1));
    untimed.capture_end();
    AcceleratorGraph holder(backend);
    holder.capture_begin(outer_stream);
    untimed.replay(outer_stream);
    holder.capture_end();
    holder.replay();
    outer_stream.synchronize();
    CHECK(counters.violations == 0);
  }
}

TEST_CASE("host backend: captured regions, ring, eager and collector") {
  Stream stream = Stream::create("host");
  const bool timed_delay = stream.capabilities().timed_delay;
  auto work = [&](std::chrono::nanoseconds d) {
    if (timed_delay)
      stream.delay(d);
    else
      stream.host_call([d] { std::this_thread::sleep_for(d); });
  };

  ProfilerOptions options;
  options.ring_depth = 2;
  Profiler prof(options);
  std::vector<uint64_t> order;
  prof.add_sink([&](const ReplayReport& r) { order.push_back(r.replay_index()); });
  AcceleratorGraph graph("host");
  prof.attach(graph);
  graph.capture_begin(stream);
  {
    auto outer = prof.region(stream, "outer", {{"n", "1"}});
    {
      auto a = prof.region(stream, "a");
      work(200us);
    }
    {
      auto b = prof.region(stream, "b");
      work(100us);
    }
  }
  graph.capture_end();
  for (int i = 0; i < 20; ++i) graph.replay();
  prof.flush();
  REQUIRE(order.size() == 20);
  for (uint64_t i = 0; i < 20; ++i) CHECK(order[i] == i);
  for (const ReplayReport& r : prof.reports()) {
    CHECK(r.backend() == "host");
    REQUIRE(r.size() == 3);
    const RegionTiming& outer = r.region(0);
    const RegionTiming& a = r.region(1);
    const RegionTiming& b = r.region(2);
    CHECK(a.raw_duration_ns() >= 200'000);
    CHECK(b.raw_duration_ns() >= 100'000);
    CHECK(a.raw_end_ns() == b.raw_start_ns());  // shared marker
    // Both are longer than the marker overhead: each loses half of it at that marker.
    CHECK(b.start_ns() - a.end_ns() == r.marker_overhead_ns());
    CHECK(outer.start_ns() <= a.start_ns());
    CHECK(outer.end_ns() >= b.end_ns());
    CHECK(outer.duration_ns() >= a.duration_ns() + b.duration_ns());
    CHECK(a.path() == "outer/a");
    CHECK(outer.metadata() == Metadata{{"n", "1"}});
  }
  // Replays follow each other on the stream.
  std::vector<ReplayReport> reports = prof.reports();
  for (size_t i = 1; i < reports.size(); ++i)
    CHECK(reports[i].region(0).start_ns() >= reports[i - 1].region(0).end_ns());

  {
    auto e = prof.region(stream, "eager");
    work(50us);
  }
  prof.flush();
  CHECK(prof.reports().back().graph_id() == 0);
  CHECK(prof.reports().back().region(0).raw_duration_ns() >= 50'000);

  ProfilerOptions bg;
  bg.background_collector = true;
  Profiler collector(bg);
  AcceleratorGraph g2("host");
  collector.attach(g2);
  g2.capture_begin(stream);
  {
    auto r = collector.region(stream, "bg");
    work(10us);
  }
  g2.capture_end();
  for (int i = 0; i < 5; ++i) g2.replay();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (collector.delivered() < 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(collector.delivered() == 5);
}

// Note [Marker budget] (spi/backend.hpp): a loop that runs ahead of a slow device. A host graph
// whose replay takes ~200 us of device time, replayed 400 times back to back: with the default
// marker_memory the ring holds them all, so the loop never waits for the device (issue 21: with
// the fixed ring of 64 it spent 0.84 of the device time per replay() call); with a small
// budget it waits, and counts it; either way every report arrives.
namespace {
struct RunAhead {
  uint64_t delivered = 0;
  bool in_order = true;
  uint64_t waits = 0;
  std::chrono::nanoseconds wait_time{0};
  double host_ns_per_replay = 0;    // the replay() calls alone
  double device_ns_per_replay = 0;  // the region's mean duration, from the reports
  std::string table;
};

RunAhead run_ahead(const ProfilerOptions& options, int replays = 400) {
  Stream stream = Stream::create("host");
  Profiler prof(options);
  RunAhead run;
  double device_ns = 0;
  prof.add_sink([&](const ReplayReport& r) {
    run.in_order = run.in_order && r.replay_index() == run.delivered;
    ++run.delivered;
    device_ns += static_cast<double>(r.region(0).duration_ns());
  });
  AcceleratorGraph graph("host");
  prof.attach(graph);
  graph.capture_begin(stream);
  {
    auto step = prof.region(stream, "step");
    if (stream.capabilities().timed_delay)
      stream.delay(200us);
    else
      stream.host_call([] { std::this_thread::sleep_for(200us); });
  }
  graph.capture_end();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < replays; ++i) graph.replay(stream);
  const auto host = std::chrono::steady_clock::now() - start;
  prof.flush();
  run.waits = prof.ring_waits();
  run.wait_time = prof.ring_wait_time();
  run.host_ns_per_replay =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(host).count()) /
      replays;
  run.device_ns_per_replay =
      run.delivered == 0 ? 0 : device_ns / static_cast<double>(run.delivered);
  run.table = prof.stats_table();
  return run;
}
}  // namespace

TEST_CASE("a loop running ahead of a slow device never waits while the marker budget allows") {
  const RunAhead run = run_ahead(ProfilerOptions{});  // default marker_memory
  INFO("host per replay() " << run.host_ns_per_replay << " ns, device per replay "
                            << run.device_ns_per_replay << " ns, waits " << run.waits);
  CHECK(run.delivered == 400);
  CHECK(run.in_order);
  CHECK(run.waits == 0);
  CHECK(run.wait_time == 0ns);
  REQUIRE(run.device_ns_per_replay >= 200'000);
  // Paced by the device, a replay() call took 0.84 of a replay's device time; running ahead it
  // takes what enqueueing costs (a few us on a 200 us replay). Bounded loosely for loaded hosts.
  CHECK(run.host_ns_per_replay < 0.4 * run.device_ns_per_replay);
  CHECK(run.table.find("ring waits:") == std::string::npos);
}

TEST_CASE("a small marker budget or an explicit ring_depth makes the loop wait, counted") {
  ProfilerOptions small;
  small.marker_memory = 4096;  // host: 8 slots of 64 stamps
  ProfilerOptions explicit_depth;
  explicit_depth.ring_depth = 4;  // wins over the default budget
  for (const ProfilerOptions& options : {small, explicit_depth}) {
    const RunAhead run = run_ahead(options);
    INFO("marker_memory " << options.marker_memory << ", ring_depth " << options.ring_depth
                          << ": waits " << run.waits);
    CHECK(run.delivered == 400);  // no report lost
    CHECK(run.in_order);
    // The ring fills at once: nearly every later launch waits for the oldest replay.
    CHECK(run.waits > 300);
    CHECK(run.wait_time > 0ns);
    // What the loop waited is most of what it took (the device paces it).
    CHECK(static_cast<double>(run.wait_time.count()) > 0.5 * 400 * run.host_ns_per_replay);
    CHECK(run.table.find(fmt::format("ring waits: {} launch(es) waited ", run.waits)) !=
          std::string::npos);
    CHECK(run.table.find("marker_memory") != std::string::npos);
  }
}

// --- foreign graphs (foreign_graph.hpp) ----------------------------------------------------------
// The owner's native capture on a fake stream is simulated the way a framework does it: it puts
// the queue behind the stream's native handle into capture mode itself, and launches the
// captured operations itself, without AcceleratorGraph.

namespace {

// What a framework holds: the operations its native capture recorded, and the queue.
struct NativeOwner {
  FakeStream* queue;
  std::vector<std::function<void()>> ops;
  explicit NativeOwner(Stream& stream) : queue(static_cast<FakeStream*>(stream.native_handle())) {}
  void begin_capture() { queue->capture_ = &ops; }
  void end_capture() { queue->capture_ = nullptr; }
  void launch() {
    for (const auto& op : ops) queue->enqueue(op);
  }
};

}  // namespace

TEST_CASE("a foreign graph: regions recorded into the owner's capture, one report per launch") {
  fresh_fake();
  Profiler prof(ProfilerOptions{.ring_depth = 2});
  std::vector<ReplayReport> sunk;
  prof.add_sink([&](const ReplayReport& r) { sunk.push_back(r); });
  Stream stream = Stream::create(kFake);
  NativeOwner owner(stream);
  accgraph::ForeignGraph foreign(kFake);
  prof.attach(foreign);

  owner.begin_capture();
  counters.tail = 3;  // the owner's capture tail: unchanged, nothing native comes
  foreign.capture_begin(stream);
  CHECK(foreign.state() == GraphState::Capturing);
  CHECK(stream.capturing_graph() == &foreign.graph());
  {
    auto outer = prof.region(stream, "step", {{"kind", "foreign"}});
    {
      auto r = prof.region(stream, "a");
      stream.delay(300ns);
    }
    {
      auto r = prof.region(stream, "b");
      stream.delay(500ns);
    }
  }
  foreign.capture_end();
  owner.end_capture();
  CHECK(foreign.state() == GraphState::Instantiated);
  // The owner's queue is native: the capture tail (a constant token here: nothing native came)
  // lets step and a begin together, a's end be b's begin, b and step end together.
  CHECK(counters.records == 3);

  // Five launches through a ring of two: the oldest is collected before a slot is reused.
  for (int i = 0; i < 5; ++i) foreign.launch(stream, [&] { owner.launch(); });
  prof.flush();
  REQUIRE(sunk.size() == 5);
  CHECK(counters.violations == 0);
  CHECK(counters.max_unread <= 2);
  for (size_t i = 0; i < sunk.size(); ++i) {
    const ReplayReport& report = sunk[i];
    CHECK(report.graph_id() == foreign.id());
    CHECK(report.replay_index() == i);
    CHECK(find_region(report, "step/a").duration_ns() == 300);
    CHECK(find_region(report, "step/b").duration_ns() == 500);
    CHECK(find_region(report, "step").duration_ns() == 800);
    CHECK(find_region(report, "step").metadata().at(0).second == "foreign");
  }
  CHECK(foreign.graph().replay_count() == 5);
}

TEST_CASE("regions and timed replays ask the backend about captures only where one may be native") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  AcceleratorGraph graph(kFake);
  prof.attach(graph);
  graph.capture_begin(stream);
  {
    auto r = prof.region(stream, "captured");
    stream.delay(100ns);
  }
  graph.capture_end();
  // An accgraph-owned stream whose native handle nobody asked for captures only through
  // accgraph: eager regions and timed replays on it make no is_capturing() call
  // (Note [Native captures] in core/seam/stream_state.hpp).
  counters.capture_queries = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = prof.region(stream, "eager");
    stream.delay(100ns);
  }
  graph.replay(stream);
  CHECK(counters.capture_queries == 0);
  prof.flush();
  // Once its handle is out, the owner may capture it natively: each boundary asks.
  NativeOwner owner(stream);
  {
    auto r = prof.region(stream, "exposed");
    stream.delay(100ns);
  }
  CHECK(counters.capture_queries >= 2);
  owner.begin_capture();
  require_error([&] { auto r = prof.region(stream, "lost"); }, ErrorCode::InvalidState,
                {"not told about"});
  owner.end_capture();
  prof.flush();
}

TEST_CASE("a foreign graph: misuse is refused with what to do") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  NativeOwner owner(stream);
  accgraph::ForeignGraph foreign(kFake);
  prof.attach(foreign);

  // The owner's native capture must have begun.
  require_error([&] { foreign.capture_begin(stream); }, ErrorCode::InvalidState,
                {"is not capturing", "begin the native capture"});
  // Nothing captured yet: nothing to launch.
  require_error([&] { foreign.launch(stream, [] {}); }, ErrorCode::InvalidState,
                {"no finished capture"});

  owner.begin_capture();
  // A region on a stream that captures natively for a graph accgraph was not told about.
  require_error([&] { auto r = prof.region(stream, "lost"); }, ErrorCode::InvalidState,
                ErrorReason::NativeCapture, {"'lost'", "not told about", "ForeignGraph"});
  foreign.capture_begin(stream);
  {
    accgraph::ForeignGraph second(kFake);
    require_error([&] { second.capture_begin(stream); }, ErrorCode::InvalidState,
                  {"already capturing into graph"});
  }
  {
    auto r = prof.region(stream, "a");
    stream.delay(100ns);
  }
  foreign.capture_end();
  owner.end_capture();

  // The graph the hooks see cannot be replayed around the owner.
  require_error([&] { foreign.graph().replay(stream); }, ErrorCode::InvalidState,
                {"foreign graph", "ForeignGraph::launch"});
  require_error([&] { foreign.graph().debug_dump("x.dot"); }, ErrorCode::Unsupported, {"owner"});

  // A launch that throws counts no execution; the next one is reported as replay 0.
  std::vector<ReplayReport> sunk;
  prof.add_sink([&](const ReplayReport& r) { sunk.push_back(r); });
  CHECK_THROWS_WITH_AS(foreign.launch(stream, [] { throw std::runtime_error("launch failed"); }),
                       "launch failed", std::runtime_error);
  foreign.launch(stream, [&] { owner.launch(); });
  prof.flush();
  REQUIRE(sunk.size() == 1);
  CHECK(sunk[0].replay_index() == 0);
  CHECK(find_region(sunk[0], "a").duration_ns() == 100);
  CHECK(counters.violations == 0);
}

TEST_CASE("a foreign graph: attach_all, reset and destruction deliver every launch") {
  fresh_fake();
  Profiler prof(ProfilerOptions{.ring_depth = 4});
  prof.attach_all();
  uint64_t delivered = 0;
  prof.add_sink([&](const ReplayReport&) { ++delivered; });
  Stream stream = Stream::create(kFake);
  NativeOwner owner(stream);
  {
    accgraph::ForeignGraph foreign(kFake);
    // The owner's capture of one region of 10 ns, told to `foreign`.
    auto capture_work = [&] {
      owner.ops.clear();
      owner.begin_capture();
      foreign.capture_begin(stream);
      {
        auto r = prof.region(stream, "work");
        stream.delay(10ns);
      }
      foreign.capture_end();
      owner.end_capture();
    };
    for (int capture = 0; capture < 2; ++capture) {
      capture_work();
      for (int i = 0; i < 3; ++i) foreign.launch(stream, [&] { owner.launch(); });
      // Launched, not collected (lazy delivery): reset collects them before the owner drops the
      // native graph.
      foreign.reset();
      CHECK(delivered == 3 * (capture + 1));
    }
    capture_work();
    foreign.launch(stream, [&] { owner.launch(); });
  }  // destroyed with one launch pending
  CHECK(delivered == 7);
  CHECK(counters.violations == 0);
}

TEST_CASE("asking for a stream's native handle ends the sharing of region boundaries") {
  fresh_fake();
  Profiler prof;
  Stream stream = Stream::create(kFake);
  {
    auto outer = prof.region(stream, "outer");
    {
      auto a = prof.region(stream, "a");
      stream.delay(10ns);
    }
    {
      auto b = prof.region(stream, "b");
      stream.delay(10ns);
    }
    CHECK(counters.records == 3);  // outer == a.begin, a.end == b.begin, b.end
    counters.tail = 9;             // a token, which an eager stream never trusts
    (void)stream.native_handle();  // native work may follow: it is neither b's nor c's
    {
      auto c = prof.region(stream, "c");
      stream.delay(10ns);
    }
    CHECK(counters.records == 5);
  }
  CHECK(counters.records == 6);  // outer's end does not share c's end either
  prof.flush();
}

// Note [Marker transitions] (timing/model/report.cpp) on the host backend, where it is pure
// arithmetic: a parent of 8 children around delays and nothing of its own reads a self time of
// exactly 0 (it read 7 x marker_overhead_ns when the overhead came off once per region), a
// parent with work of its own between two children reads that work as its self time, and
// parent = sum(children) + self exactly; an empty region reads far less than its sibling's work.
TEST_CASE("host backend: a parent is the sum of its children plus its self time, exactly") {
  Stream stream = Stream::create("host");
  Profiler prof;
  AcceleratorGraph graph("host");
  prof.attach(graph);
  graph.capture_begin(stream);
  {
    auto parent = prof.region(stream, "parent");
    for (int i = 0; i < 8; ++i) {
      auto child = prof.region(stream, "child" + std::to_string(i));
      stream.delay(20us);
    }
  }
  {
    auto glue = prof.region(stream, "glue");
    {
      auto a = prof.region(stream, "a");
      stream.delay(20us);
    }
    stream.delay(50us);  // the parent's own work
    {
      auto b = prof.region(stream, "b");
      stream.delay(20us);
    }
    { auto empty = prof.region(stream, "empty"); }
  }
  graph.capture_end();
  for (int i = 0; i < 5; ++i) graph.replay();
  prof.flush();
  const std::vector<ReplayReport> reports = prof.reports();
  REQUIRE(reports.size() == 5);
  std::vector<uint64_t> empty, work;
  for (const ReplayReport& r : reports) {
    REQUIRE(r.size() == 13);
    CHECK(r.marker_overhead_ns() > 0);
    const RegionTiming parent = r.region(0);
    uint64_t children = 0;
    for (size_t i = 1; i <= 8; ++i) children += r.region(i).duration_ns();
    CHECK(parent.self_ns() == 0);
    CHECK(parent.duration_ns() == children);
    CHECK(parent.duration_ns() < parent.span_ns());  // the 7 transitions between children
    const RegionTiming glue = r.region(9);
    const uint64_t sum =
        r.region(10).duration_ns() + r.region(11).duration_ns() + r.region(12).duration_ns();
    CHECK(glue.duration_ns() == sum + glue.self_ns());
    CHECK(glue.self_ns() >= 50'000 - r.marker_overhead_ns());  // a delay lasts at least its time
    CHECK(r.layout().back_to_back_transitions(12) == 1);       // empty: two markers back to back
    empty.push_back(r.region(12).duration_ns());
    work.push_back(r.region(10).duration_ns());
  }
  std::sort(empty.begin(), empty.end());
  std::sort(work.begin(), work.end());
  CHECK(empty[2] * 10 < work[2]);
}

// Note [Marker overhead]: the host backend's markers cost the worker some nanoseconds each;
// a profiler measures that once per device (here at the graph's first launch or at the first
// eager region, whichever comes first in this process) and takes it off every region longer.
TEST_CASE("host backend: the marker overhead is measured once and taken off both paths") {
  Stream stream = Stream::create("host");
  auto timed = [&](const ProfilerOptions& options) {
    Profiler prof(options);
    AcceleratorGraph graph("host");
    prof.attach(graph);
    graph.capture_begin(stream);
    {
      auto outer = prof.region(stream, "outer");
      { auto empty = prof.region(stream, "empty"); }  // two markers back to back
      auto spin = prof.region(stream, "spin");
      stream.delay(20us);
    }
    graph.capture_end();
    for (int i = 0; i < 3; ++i) graph.replay();
    {
      auto eager = prof.region(stream, "eager");
      stream.delay(20us);
    }
    prof.flush();
    return prof.reports();
  };
  const std::vector<ReplayReport> reports = timed(ProfilerOptions{});
  REQUIRE(reports.size() == 4);
  const uint64_t overhead = reports[0].marker_overhead_ns();
  CHECK(overhead > 0);
  CHECK(overhead < 20'000);  // far less than the work it is taken off
  const uint64_t pair = reports[0].source().marker_back_to_back_ns;
  CHECK(pair > 0);
  for (const ReplayReport& r : reports) {
    CHECK(r.marker_overhead_ns() == overhead);  // graph and eager: one measure per device
    CHECK(r.source().marker_back_to_back_ns == pair);
    // Note [Marker transitions]: spin and eager span one transition, empty one back to back,
    // outer both (its markers: its begin = empty's, empty's end = spin's begin, spin's end).
    for (size_t i = 0; i < r.size(); ++i) {
      const RegionTiming t = r.region(i);
      CAPTURE(t.path());
      REQUIRE(t.measurable());
      const uint64_t raw = t.raw_duration_ns();
      CHECK(r.layout().marker_transitions(i) == (t.path() == "outer" ? 2u : 1u));
      if (t.path() == "outer/empty")
        CHECK(t.duration_ns() == 0);  // back to back: nothing but markers
      else if (t.path() == "outer")
        CHECK(t.duration_ns() == r.region(i + 2).duration_ns());  // empty (0) + spin
      else if (raw > overhead)
        CHECK(t.duration_ns() == raw - overhead);
      else
        CHECK(t.duration_ns() == 0);  // no longer than a transition: never negative
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    CHECK(reports[i].region(2).raw_duration_ns() >= 20'000);  // the markers: at least the work
    CHECK(reports[i].region(2).raw_start_ns() == reports[i].region(1).raw_end_ns());
  }
  CHECK(reports[3].region(0).raw_duration_ns() >= 20'000);

  ProfilerOptions raw;
  raw.subtract_marker_overhead = false;
  for (const ReplayReport& r : timed(raw)) {
    CHECK(r.marker_overhead_ns() == 0);
    for (const RegionTiming& t : r.regions()) CHECK(t.duration_ns() == t.raw_duration_ns());
  }
}

// --- sampled replays (Note [Sampled replays] in spi/untimed_replay.hpp) ------------------------

namespace {

// A host graph of one region around a host call that counts the replays that ran its work.
struct CountingGraph {
  explicit CountingGraph(Profiler& prof, int profilers_attached = 1) {
    (void)profilers_attached;
    prof.attach(graph);
    graph.capture_begin(stream);
    {
      auto r = prof.region(stream, "work");
      stream.host_call([this] { runs.fetch_add(1); });
    }
    graph.capture_end();
  }
  ~CountingGraph() {
    try {
      stream.synchronize();  // untimed replays may still run: they count into `runs`
    } catch (const Error& e) {
      FAIL_CHECK(e.what());
    }
  }
  std::atomic<uint64_t> runs{0};  // first: outlives the stream's work
  AcceleratorGraph graph{"host"};
  Stream stream = Stream::create("host");
};

std::vector<uint64_t> replay_indices(const Profiler& prof) {
  std::vector<uint64_t> indices;
  for (const ReplayReport& r : prof.reports()) indices.push_back(r.replay_index());
  return indices;
}

ProfilerOptions sampled(uint64_t every, uint64_t seed) {
  ProfilerOptions options;
  options.sample_every = every;
  options.sample_seed = seed;
  options.keep_reports = KeepReports::all();
  return options;
}

}  // namespace

TEST_CASE("sampling: 1 replay in N is timed, one in each window of N; every replay runs its work") {
  Profiler prof(sampled(4, 7));
  CountingGraph g(prof);
  for (int i = 0; i < 400; ++i) g.graph.replay();
  g.stream.synchronize();
  prof.flush();
  CHECK(g.runs.load() == 400);
  const std::vector<uint64_t> indices = replay_indices(prof);
  REQUIRE(indices.size() == 100);
  std::set<uint64_t> offsets;
  for (uint64_t w = 0; w < 100; ++w) {
    CHECK(indices[w] / 4 == w);  // one in each window, in order
    offsets.insert(indices[w] % 4);
  }
  CHECK(offsets.size() > 1);  // the phase moves from window to window (no aliasing)
  for (const ReplayReport& r : prof.reports()) CHECK(r.region(0).measurable());
  const std::vector<GraphReplays> counts = prof.replay_counts();
  REQUIRE(counts.size() == 1);
  CHECK(counts[0].graph_id == g.graph.id());
  CHECK(counts[0].run == 400);
  CHECK(counts[0].timed == 100);
  CHECK(counts[0].sample_every == 4);
  CHECK(counts[0].sampled);
  const std::vector<RegionStats> stats = prof.stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].count == 100);
  CHECK(stats[0].replays_run == 400);
  CHECK(stats[0].replays_timed == 100);
  CHECK(prof.stats_table().find("sampled: graph " + std::to_string(g.graph.id()) +
                                ": 100 of 400 replay(s) timed (1 in 4)") != std::string::npos);
}

TEST_CASE("sampling: the schedule is the seed's: the same seed times the same replays") {
  std::vector<uint64_t> first, again, other;
  for (auto [seed, out] : {std::pair<uint64_t, std::vector<uint64_t>*>{11, &first},
                           {11, &again}, {12, &other}}) {
    Profiler prof(sampled(8, seed));
    CountingGraph g(prof);
    for (int i = 0; i < 256; ++i) g.graph.replay();
    prof.flush();
    // Graph ids differ between the runs: the schedule is drawn from the seed and the graph id,
    // so compare offsets within windows through is_sampled_replay's own contract instead.
    for (uint64_t index : replay_indices(prof)) out->push_back(index);
    CHECK(out->size() == 32);
    for (uint64_t index : *out)
      CHECK(accgraph::timing::is_sampled_replay(index, 8, seed, g.graph.id()));
  }
  CHECK(accgraph::timing::is_sampled_replay(5, 1, 0, 1));  // N = 1: every replay
}

TEST_CASE("sampling: sample_every 1 times every replay, as before") {
  Profiler prof(sampled(1, 0));
  CountingGraph g(prof);
  for (int i = 0; i < 30; ++i) g.graph.replay();
  prof.flush();
  std::vector<uint64_t> expected(30);
  for (uint64_t i = 0; i < 30; ++i) expected[i] = i;
  CHECK(replay_indices(prof) == expected);
  CHECK(prof.stats_table().find("sampled:") == std::string::npos);
}

TEST_CASE("sampling: a graph two profilers time has every replay timed, and says so") {
  Profiler first(sampled(4, 1));
  Profiler second(sampled(4, 2));
  CountingGraph g(first);
  // A second capture timed by both: two instruments on one graph.
  second.attach(g.graph);
  g.graph.reset();
  g.graph.capture_begin(g.stream);
  {
    auto a = first.region(g.stream, "a");
    auto b = second.region(g.stream, "b");
    g.stream.host_call([&] { g.runs.fetch_add(1); });
  }
  g.graph.capture_end();
  for (int i = 0; i < 20; ++i) g.graph.replay();
  first.flush();
  second.flush();
  CHECK(first.reports().size() == 20);
  CHECK(second.reports().size() == 20);
  const std::vector<GraphReplays> counts = first.replay_counts();
  REQUIRE(counts.size() == 1);
  CHECK(counts[0].run == 20);
  CHECK(counts[0].timed == 20);
  CHECK_FALSE(counts[0].sampled);
  CHECK(first.stats_table().find("every replay timed: its backend cannot launch it without "
                                 "markers, a foreign graph's owner did not allow it, or "
                                 "another profiler times it too") != std::string::npos);
}

TEST_CASE("sampling: bad options are refused when the profiler is made") {
  ProfilerOptions zero;
  zero.sample_every = 0;
  require_error([&] { Profiler p(zero); }, ErrorCode::InvalidArgument,
                {"sample_every is 0", "N >= 1"});
  for (double bad : {-0.1, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    ProfilerOptions options;
    options.overhead = bad;
    require_error([&] { Profiler p(options); }, ErrorCode::InvalidArgument,
                  {"is not a fraction in [0, 1)", "0.005"});
  }
  ProfilerOptions both;
  both.sample_every = 4;
  both.overhead = 0.01;
  require_error([&] { Profiler p(both); }, ErrorCode::InvalidArgument,
                {"both sample_every (4) and overhead (0.01) are set"});
}

TEST_CASE("sampling: an overhead budget times the first replays, then picks N from their cost") {
  ProfilerOptions options;
  options.overhead = 0.005;
  options.keep_reports = KeepReports::all();
  Profiler prof(options);
  CountingGraph g(prof);
  for (int i = 0; i < 8; ++i) g.graph.replay();
  CHECK(prof.replay_counts().at(0).sample_every == 1);  // nothing collected yet
  prof.flush();  // the first 8 reports: N chosen
  const GraphReplays chosen = prof.replay_counts().at(0);
  CHECK(chosen.timed == 8);
  const uint64_t every = chosen.sample_every;
  CHECK(every >= 1);
  for (int i = 0; i < 800; ++i) g.graph.replay();
  g.stream.synchronize();  // flush() waits for the timed replays only: untimed ones report nothing
  prof.flush();
  const GraphReplays after = prof.replay_counts().at(0);
  CHECK(after.run == 808);
  CHECK(g.runs.load() == 808);
  uint64_t expected = 8;
  for (uint64_t r = 8; r < 808; ++r)
    expected += accgraph::timing::is_sampled_replay(r, every, 0, g.graph.id()) ? 1 : 0;
  CHECK(after.timed == expected);
  CHECK(prof.reports().size() == expected);
}
