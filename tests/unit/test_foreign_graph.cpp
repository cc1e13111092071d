// accgraph/foreign_graph.hpp on the host backend: owners that break the launch contract
// (fn launches nothing, twice, or launches and then raises) never hang flush, reset or the
// profiler's destruction, their launches are reported unmeasurable (never with another launch's
// times), and later launches are reported again (Note [Launch fences] in
// timing/engine/marker_ring.cpp; audit 2026-11-25 #29, #31, #32, #33).
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "accgraph/accgraph.hpp"

using namespace accgraph;
using namespace std::chrono_literals;
using timing::Profiler;
using timing::ProfilerOptions;
using timing::ReplayReport;

namespace {

// A framework's native capture and launch, played by an accgraph graph on the queue of `owner`;
// `wrapped` wraps that queue: the stream the ForeignGraph and the regions see.
struct NativeOwner {
  Stream owner = Stream::create("host");
  Stream wrapped = Stream::wrap("host", 0, owner.native_handle());
  AcceleratorGraph graph{"host"};
  void launch() { graph.replay(owner); }
};

constexpr auto kWork = 200us;

// The owner captures one region of kWork; `foreign` joins the capture.
void capture(Profiler& prof, ForeignGraph& foreign, NativeOwner& owner) {
  owner.owner.synchronize();
  owner.graph.reset();  // the owner's previous graph, if any
  owner.graph.capture_begin(owner.owner);
  foreign.capture_begin(owner.wrapped);
  {
    auto r = prof.region(owner.wrapped, "work");
    owner.wrapped.delay(kWork);
  }
  foreign.capture_end();
  owner.graph.capture_end();
}

// Runs `fn` on another thread and fails the test if it does not return within 20 s (the bug
// was a wait that never returned).
template <class Fn>
void returns_in_time(const char* what, Fn fn) {
  auto done = std::async(std::launch::async, fn);
  INFO(what);
  REQUIRE(done.wait_for(20s) == std::future_status::ready);
  done.get();
}

struct Collected {
  std::mutex mutex;
  std::vector<ReplayReport> reports;
  explicit Collected(Profiler& prof) {
    prof.add_sink([this](const ReplayReport& r) {
      std::lock_guard<std::mutex> lock(mutex);
      reports.push_back(r);
    });
  }
  std::vector<ReplayReport> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::move(reports);
  }
};

// A measurable report of the one region is this launch's own: at least kWork long.
void check_measured(const ReplayReport& report) {
  REQUIRE(report.size() == 1);
  CHECK(report.region(0).measurable());
  CHECK(report.region(0).raw_duration_ns() >= 200'000);
}

// Flushes (within 20 s) and checks that the reports are replays 0 .. count - 1, each measured.
void flush_expect_measured(Profiler& prof, Collected& collected, size_t count) {
  returns_in_time("flush", [&] { prof.flush(); });
  std::vector<ReplayReport> reports = collected.take();
  REQUIRE(reports.size() == count);
  for (size_t i = 0; i < reports.size(); ++i) {
    CAPTURE(i);
    CHECK(reports[i].replay_index() == i);
    check_measured(reports[i]);
  }
}

struct WarningCounter {
  static inline std::atomic<int> warnings{0};
  static void handler(LogLevel level, const char* message, void*) {
    if (level == LogLevel::Warning &&
        std::string(message).find("exactly one execution") != std::string::npos)
      ++warnings;
  }
};

}  // namespace

// audit 2026-11-25 #29: a launch that launched nothing hung flush(), reset() and exit.
TEST_CASE("ForeignGraph: a launch that runs nothing is reported unmeasurable; flush returns") {
  set_log_handler(&WarningCounter::handler);
  WarningCounter::warnings = 0;
  NativeOwner owner;
  for (const bool flush_between : {true, false}) {
    CAPTURE(flush_between);
    auto prof = std::make_unique<Profiler>(ProfilerOptions{.ring_depth = 4});
    Collected collected(*prof);
    ForeignGraph foreign("host");
    prof->attach(foreign);
    capture(*prof, foreign, owner);
    foreign.launch(owner.wrapped, [] {});  // breaks the rule: no execution
    if (flush_between) returns_in_time("flush after a launch of nothing", [&] { prof->flush(); });
    for (int i = 0; i < 3; ++i) foreign.launch(owner.wrapped, [&] { owner.launch(); });
    returns_in_time("flush", [&] { prof->flush(); });
    std::vector<ReplayReport> reports = collected.take();
    REQUIRE(reports.size() == 4);
    CHECK_FALSE(reports[0].region(0).measurable());
    // Never another launch's times: what is measurable is a whole launch of the work.
    for (const ReplayReport& r : reports)
      if (r.region(0).measurable()) CHECK(r.region(0).raw_duration_ns() >= 200'000);
    if (flush_between)
      for (size_t i = 1; i < reports.size(); ++i) check_measured(reports[i]);
    // Later launches are measured again, and reset / destruction return.
    for (int i = 0; i < 3; ++i) foreign.launch(owner.wrapped, [&] { owner.launch(); });
    foreign.launch(owner.wrapped, [] {});  // and once more nothing, left pending
    returns_in_time("reset with a launch of nothing pending", [&] { foreign.reset(); });
    reports = collected.take();
    REQUIRE(reports.size() == 4);
    for (int i = 0; i < 3; ++i) check_measured(reports[static_cast<size_t>(i)]);
    CHECK_FALSE(reports[3].region(0).measurable());
    capture(*prof, foreign, owner);
    foreign.launch(owner.wrapped, [] {});
    returns_in_time("destroying the profiler", [&] { prof.reset(); });
    owner.owner.synchronize();
  }
  CHECK(WarningCounter::warnings >= 1);
  set_log_handler(nullptr);
}

// audit 2026-11-25 #31: a launch that ran the graph twice was reported wrongly or blamed on the
// ring depth.
TEST_CASE("ForeignGraph: a launch that runs the graph twice is reported unmeasurable") {
  NativeOwner owner;
  Profiler prof(ProfilerOptions{.ring_depth = 2});
  Collected collected(prof);
  ForeignGraph foreign("host");
  prof.attach(foreign);
  capture(prof, foreign, owner);
  foreign.launch(owner.wrapped, [&] { owner.launch(); });
  // Collected first: the second execution of the next launch writes one ring slot more than the
  // ring has, which is the slot of an earlier launch still unread (that one is then reported
  // unmeasurable, never with the wrong times).
  prof.flush();
  foreign.launch(owner.wrapped, [&] {
    owner.launch();
    owner.launch();
  });
  returns_in_time("flush", [&] { prof.flush(); });
  for (int i = 0; i < 5; ++i) foreign.launch(owner.wrapped, [&] { owner.launch(); });
  returns_in_time("flush", [&] { prof.flush(); });
  std::vector<ReplayReport> reports = collected.take();
  REQUIRE(reports.size() == 7);
  check_measured(reports[0]);
  CHECK_FALSE(reports[1].region(0).measurable());
  for (size_t i = 2; i < reports.size(); ++i) {
    CAPTURE(i);
    check_measured(reports[i]);
    CHECK(reports[i].replay_index() == i);
  }
}

// audit 2026-11-25 #32, #33: a launch that raises counts no execution; one that launched before
// raising must not put later launches out of step (they were lost).
TEST_CASE("ForeignGraph: a launch that raises, before or after launching, loses no later report") {
  NativeOwner owner;
  Profiler prof(ProfilerOptions{.ring_depth = 2});
  Collected collected(prof);
  ForeignGraph foreign("host");
  prof.attach(foreign);
  capture(prof, foreign, owner);
  CHECK_THROWS_WITH_AS(foreign.launch(owner.wrapped, [] { throw std::runtime_error("before"); }),
                       "before", std::runtime_error);
  CHECK_THROWS_WITH_AS(foreign.launch(owner.wrapped,
                                      [&] {
                                        owner.launch();
                                        throw std::runtime_error("after");
                                      }),
                       "after", std::runtime_error);
  for (int i = 0; i < 3; ++i) foreign.launch(owner.wrapped, [&] { owner.launch(); });
  flush_expect_measured(prof, collected, 3);
  CHECK(foreign.graph().replay_count() == 3);
}

TEST_CASE("ForeignGraph: trusted launches (no fence) are reported like checked ones") {
  NativeOwner owner;
  Profiler prof(ProfilerOptions{.ring_depth = 2});
  Collected collected(prof);
  ForeignGraph foreign("host");
  prof.attach(foreign);
  capture(prof, foreign, owner);
  for (int i = 0; i < 5; ++i)
    foreign.launch(
        owner.wrapped, [&] { owner.launch(); },
        i % 2 == 0 ? LaunchCheck::Trusted : LaunchCheck::Fenced);
  flush_expect_measured(prof, collected, 5);
}

// Note [Trusted launches and captures]: while the owner's queue captures into another graph, a
// checked launch is refused by accgraph before the owner's launch runs; a trusted one is not
// asked about (its owner refuses a capturing stream itself, as PyTorch's replay does): the
// owner's refusal propagates, counts nothing, and the next launch takes the number.
TEST_CASE("ForeignGraph: a launch into another capture is refused, by the owner when trusted") {
  NativeOwner owner;
  Profiler prof;
  Collected collected(prof);
  ForeignGraph foreign("host");
  prof.attach(foreign);
  capture(prof, foreign, owner);
  foreign.launch(
      owner.wrapped, [&] { owner.launch(); }, LaunchCheck::Trusted);
  owner.owner.synchronize();
  AcceleratorGraph outer("host");
  outer.capture_begin(owner.owner);
  int calls = 0;
  auto refusing_owner = [&] {
    ++calls;
    if (owner.wrapped.is_capturing()) throw std::runtime_error("the owner refuses a capture");
    owner.launch();
  };
  try {
    foreign.launch(owner.wrapped, refusing_owner, LaunchCheck::Fenced);
    FAIL("a checked launch into another capture was not refused");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidState);
    CHECK(std::string(e.what()).find("cannot be replayed into another capture") !=
          std::string::npos);
  }
  CHECK(calls == 0);
  CHECK_THROWS_WITH_AS(foreign.launch(owner.wrapped, refusing_owner, LaunchCheck::Trusted),
                       "the owner refuses a capture", std::runtime_error);
  CHECK(calls == 1);
  CHECK(owner.wrapped.is_capturing());  // the outer capture goes on
  outer.capture_end();
  CHECK(foreign.graph().replay_count() == 1);
  foreign.launch(owner.wrapped, refusing_owner, LaunchCheck::Trusted);
  flush_expect_measured(prof, collected, 2);
}

namespace {

// Note [Launch waits]: what a launch does with its caller's lock (GilWaits in the Python
// binding gives up the GIL). `held` is the lock's state; every release must be followed by a
// reacquire before the next release, and the launch must return with it held.
struct RecordingWaits final : LaunchWaits {
  bool held = true;
  int releases = 0;
  bool unbalanced = false;
  void release() noexcept override {
    unbalanced = unbalanced || !held;
    held = false;
    ++releases;
  }
  void reacquire() noexcept override {
    unbalanced = unbalanced || held;
    held = true;
  }
};

struct HeldChecker final : GraphObserver {
  RecordingWaits* waits = nullptr;
  int calls_while_held = 0;
  int calls = 0;
  void on_replay_begin(AcceleratorGraph& graph, Stream&) override { seen(graph); }
  void on_replay_end(AcceleratorGraph& graph, Stream&) override { seen(graph); }
  void seen(const AcceleratorGraph& graph) {
    if (!graph.is_foreign()) return;  // the owner's own replay inside fn
    ++calls;
    if (waits->held) ++calls_while_held;
  }
};

}  // namespace

TEST_CASE("ForeignGraph: a launch gives the caller's lock up only where it may wait") {
  NativeOwner owner;
  RecordingWaits waits;
  bool fn_held = true;  // the owner's launch always ran with the lock
  auto launch_with_waits = [&](ForeignGraph& foreign) {
    foreign.launch(
        owner.wrapped,
        [&] {
          fn_held = fn_held && waits.held;
          owner.launch();
        },
        LaunchCheck::Trusted, &waits);
  };

  SUBCASE("lazy delivery: the first launch and a full ring wait; a launch with room does not") {
    Profiler prof(ProfilerOptions{.ring_depth = 2});
    Collected collected(prof);
    ForeignGraph foreign("host");
    prof.attach(foreign);
    capture(prof, foreign, owner);
    launch_with_waits(foreign);  // the first launch measures the marker overhead
    CHECK(waits.releases == 1);
    launch_with_waits(foreign);  // one slot of two taken: room, lazy delivery
    CHECK(waits.releases == 1);
    launch_with_waits(foreign);  // full: the oldest replay is collected first
    CHECK(waits.releases == 2);
    CHECK(prof.ring_waits() == 1);
    prof.flush();
    CHECK(collected.take().size() == 3);
  }
  SUBCASE("Immediate delivery: the sink runs with the lock given up") {
    Profiler prof(ProfilerOptions{.delivery = timing::Delivery::Immediate});
    int sink_calls = 0;
    int sink_calls_while_held = 0;
    prof.add_sink([&](const ReplayReport&) {
      ++sink_calls;
      if (waits.held) ++sink_calls_while_held;
    });
    ForeignGraph foreign("host");
    prof.attach(foreign);
    capture(prof, foreign, owner);
    for (int i = 0; i < 3; ++i) launch_with_waits(foreign);
    CHECK(sink_calls == 3);
    CHECK(sink_calls_while_held == 0);
    CHECK(waits.releases == 4);  // the first launch's overhead, then each delivery
  }
  SUBCASE("replay observers run with the lock given up") {
    HeldChecker observer;
    observer.waits = &waits;
    ObserverHandle handle = add_graph_observer(observer);
    Profiler prof(ProfilerOptions{.ring_depth = 8});
    ForeignGraph foreign("host");
    prof.attach(foreign);
    capture(prof, foreign, owner);
    for (int i = 0; i < 3; ++i) launch_with_waits(foreign);
    CHECK(observer.calls == 6);
    CHECK(observer.calls_while_held == 0);
    prof.flush();
  }
  SUBCASE("an owner's launch that throws leaves the lock held, the pairs balanced") {
    Profiler prof(ProfilerOptions{.ring_depth = 2});
    ForeignGraph foreign("host");
    prof.attach(foreign);
    capture(prof, foreign, owner);
    for (int i = 0; i < 4; ++i)
      CHECK_THROWS_AS(foreign.launch(
                          owner.wrapped, [] { throw std::runtime_error("owner failed"); },
                          LaunchCheck::Trusted, &waits),
                      std::runtime_error);
    launch_with_waits(foreign);
    prof.flush();
  }
  CHECK(waits.held);
  CHECK_FALSE(waits.unbalanced);
  CHECK(fn_held);
}

// Note [Replay waits] in core/graph.cpp: AcceleratorGraph::replay(waits) gives the lock up where
// the timing waits, as a foreign launch does, and keeps it around the backend's launch unless
// it gave it up earlier in that replay (then another thread may have run with it). Counted by
// releases: each release is one LaunchWaitScope, and the one around the backend's launch is the
// only release that no hook makes.
TEST_CASE("AcceleratorGraph::replay(waits) keeps the caller's lock unless the replay waited") {
  RecordingWaits waits;
  Stream s = Stream::create("host");
  AcceleratorGraph graph("host");
  auto capture_timed = [&](Profiler& prof) {
    prof.attach(graph);
    graph.capture_begin(s);
    {
      auto r = prof.region(s, "work");
      s.delay(kWork);
    }
    graph.capture_end();
  };

  SUBCASE("untimed: never given up") {
    graph.capture_begin(s);
    s.delay(kWork);
    graph.capture_end();
    for (int i = 0; i < 3; ++i) graph.replay(waits);
    graph.replay(s, waits);
    CHECK(waits.releases == 0);
    CHECK(graph.replay_count() == 4);
  }
  SUBCASE("keep_graph: the first replay instantiates with it given up, so its launch too") {
    AcceleratorGraph kept("host", GraphArgs{.keep_graph = true});
    kept.capture_begin(s);
    s.delay(kWork);
    kept.capture_end();
    kept.replay(waits);
    CHECK(waits.releases == 2);
    kept.replay(waits);
    kept.replay(s, waits);
    CHECK(waits.releases == 2);
  }
  SUBCASE("lazy delivery: the first launch and a full ring wait, and their launches give it up") {
    Profiler prof(ProfilerOptions{.ring_depth = 2});
    Collected collected(prof);
    capture_timed(prof);
    graph.replay(waits);  // the marker overhead is measured, then the launch gives it up too
    CHECK(waits.releases == 2);
    graph.replay(waits);  // room in the ring: held throughout
    CHECK(waits.releases == 2);
    graph.replay(s, waits);  // full: the oldest replay is collected, and the launch gives it up
    CHECK(waits.releases == 4);
    CHECK(prof.ring_waits() == 1);
    graph.replay(s, waits);
    CHECK(waits.releases == 6);
    prof.flush();
    CHECK(collected.take().size() == 4);
  }
  SUBCASE("Immediate delivery: after the launch, which keeps it") {
    Profiler prof(ProfilerOptions{.delivery = timing::Delivery::Immediate});
    Collected collected(prof);
    capture_timed(prof);
    graph.replay(waits);  // overhead, launch, delivery
    CHECK(waits.releases == 3);
    graph.replay(waits);  // delivery only
    graph.replay(waits);
    CHECK(waits.releases == 5);
    CHECK(collected.take().size() == 3);
  }
  SUBCASE("replay observers: user code, so the launch after them gives it up too") {
    Profiler prof(ProfilerOptions{.ring_depth = 8});
    capture_timed(prof);
    graph.replay(waits);
    const int before = waits.releases;
    HeldChecker observer;  // counts foreign graphs only: here, the releases tell
    observer.waits = &waits;
    ObserverHandle handle = add_graph_observer(observer);
    graph.replay(waits);  // on_replay_begin, the launch, on_replay_end
    CHECK(waits.releases - before == 3);
    prof.flush();
  }
  SUBCASE("a refused replay leaves the lock held, the pairs balanced") {
    Profiler prof;
    capture_timed(prof);
    graph.replay(waits);
    // A timed replay into another graph's capture is refused before the backend is called.
    Stream other = Stream::create("host");
    AcceleratorGraph capturing("host");
    capturing.capture_begin(other);
    CHECK_THROWS_AS(graph.replay(other, waits), Error);
    capturing.capture_end();
    graph.replay(waits);
    prof.flush();
  }
  CHECK(waits.held);
  CHECK_FALSE(waits.unbalanced);
}
