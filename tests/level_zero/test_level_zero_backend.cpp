// Tests of the level_zero backend through the real Level Zero loader: without a driver (the
// backend is unavailable with a reason and the rest works), and with the CPU test driver (the
// capture path ctest asked for is the one in use; capture, replay and markers; marker memory
// outliving the device's writes; wrapped streams; timestamps that wrap around, and regions
// longer than the counter's period). Each ctest registration selects its cases with
// --test-case and sets the environment they require (see CMakeLists.txt).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "timing_seam.hpp"
#include "accgraph/accgraph.hpp"
#include "check_error.hpp"

using namespace accgraph;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// Collects the warnings accgraph logs while it exists.
class CapturedWarnings {
 public:
  CapturedWarnings() { set_log_handler(&CapturedWarnings::handle, this); }
  ~CapturedWarnings() { set_log_handler(nullptr); }
  std::vector<std::string> containing(const std::string& text) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> found;
    for (const std::string& message : messages_)
      if (message.find(text) != std::string::npos) found.push_back(message);
    return found;
  }

 private:
  static void handle(LogLevel level, const char* message, void* self) {
    if (level < LogLevel::Warning) return;
    auto* captured = static_cast<CapturedWarnings*>(self);
    std::lock_guard<std::mutex> lock(captured->mutex_);
    captured->messages_.emplace_back(message);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

/// One eager sequence of two markers around `spin` of device work, published and waited for.
std::vector<uint64_t> timed_spin(TimestampMarkers& markers, Stream& stream, uint64_t sequence,
                                 std::chrono::nanoseconds spin) {
  markers.begin_sequence(detail::StreamAccess::impl(stream));
  markers.record(detail::StreamAccess::impl(stream), 0);
  stream.delay(spin);
  markers.record(detail::StreamAccess::impl(stream), 1);
  markers.end_sequence(detail::StreamAccess::impl(stream));
  markers.after_eager_sequence(detail::StreamAccess::impl(stream), sequence);
  markers.wait(sequence);
  CHECK(markers.is_complete(sequence));
  std::vector<uint64_t> times(2);
  markers.read(sequence, times.data(), times.size());
  return times;
}

/// ZE_ACCGRAPH_CPU_VALID_BITS, required for the cases about the counter's period.
uint64_t required_valid_bits() {
  const std::string bits = env("ZE_ACCGRAPH_CPU_VALID_BITS");
  REQUIRE_MESSAGE(!bits.empty(), "run this case with ZE_ACCGRAPH_CPU_VALID_BITS set (8-63)");
  const uint64_t value = std::stoull(bits);
  REQUIRE((value >= 8 && value < 64));
  return value;
}

BackendStatus level_zero_status() {
  for (const BackendStatus& status : Registry::instance().status())
    if (status.name == "level_zero") return status;
  FAIL("level_zero is not registered at all");
  return {};
}

}  // namespace

TEST_CASE("no driver: level_zero is unavailable with a reason, host still works") {
  REQUIRE_MESSAGE(std::getenv("ZE_ENABLE_ALT_DRIVERS") == nullptr,
                  "run this case without ZE_ENABLE_ALT_DRIVERS");
  BackendStatus status = level_zero_status();
  CHECK_FALSE(status.available);
  CHECK(status.unavailable_reason.find("zeInit failed with ZE_RESULT_ERROR_UNINITIALIZED") !=
        std::string::npos);
  CHECK(status.unavailable_reason.find("set ZE_ENABLE_ALT_DRIVERS=") != std::string::npos);
  try {
    Registry::instance().backend("level_zero");
    FAIL("backend(\"level_zero\") did not throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unavailable);
    CHECK(e.message().find("ZE_ENABLE_ALT_DRIVERS") != std::string::npos);
  }
  CHECK(default_backend_name() != "level_zero");

  Stream stream = Stream::create("host");
  Buffer a = Buffer::allocate(stream, 64, MemoryKind::Host);
  Buffer b = Buffer::allocate(stream, 64, MemoryKind::Host);
  stream.fill(a, 0x5a);
  stream.copy(b, a);
  stream.synchronize();
  CHECK(b.as<uint8_t>()[63] == 0x5a);
}

TEST_CASE("driver: the capture path is the expected one") {
  const std::string expected = env("ACCGRAPH_TEST_EXPECT_CAPTURE");
  REQUIRE_MESSAGE(!expected.empty(),
                  "set ACCGRAPH_TEST_EXPECT_CAPTURE to 'native graphs' or "
                  "'regular command lists'");
  BackendStatus status = level_zero_status();
  REQUIRE_MESSAGE(status.available, status.unavailable_reason);
  REQUIRE(status.devices.size() >= 1);
  const std::string& name = status.devices[0].name;
  INFO("device name: " << name);
  CHECK(name.find("[capture: " + expected) != std::string::npos);
  CHECK(status.capabilities.timed_delay);
  CHECK(status.capabilities.marker_strategies == std::vector<std::string>{"global_timestamps"});
  CHECK(status.capabilities.marker_ring_depth == 16);
  CHECK(status.capabilities.timer_resolution_ns == 1);
}

TEST_CASE("driver: capture, replay and timed regions") {
  Stream stream = Stream::create("level_zero");
  Buffer source = Buffer::allocate(stream, 4096, MemoryKind::Device);
  Buffer destination = Buffer::allocate(stream, 4096, MemoryKind::Device);
  Buffer check = Buffer::allocate(stream, 4096, MemoryKind::Host);

  stream.fill(destination, 0);  // eager: runs now
  timing::Profiler profiler;
  AcceleratorGraph graph("level_zero");
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto r = profiler.region(stream, "fill");
    stream.fill(source, 0x42);
  }
  {
    auto r = profiler.region(stream, "spin");
    stream.delay(std::chrono::microseconds(300));
  }
  {
    auto r = profiler.region(stream, "copy");
    stream.copy(destination, source);
  }
  graph.capture_end();
  // Capturing recorded the work; it did not run it.
  stream.copy(check, destination);
  stream.synchronize();
  CHECK(check.as<uint8_t>()[0] == 0);
  CHECK(graph.stats().nodes >= 3);

  constexpr int kReplays = 40;  // more than the ring depth (16): slots are reused
  for (int i = 0; i < kReplays; ++i) graph.replay();
  profiler.flush();
  stream.copy(check, destination);
  stream.synchronize();
  CHECK(check.as<uint8_t>()[4095] == 0x42);

  std::vector<timing::ReplayReport> reports = profiler.reports();
  REQUIRE(reports.size() == kReplays);
  for (const timing::ReplayReport& report : reports) {
    REQUIRE(report.size() == 3);
    CHECK(report.backend() == "level_zero");
    CHECK(report.marker_strategy() == "global_timestamps");
    const timing::RegionTiming& spin = report.region(1);
    CHECK(spin.name() == "spin");
    CHECK(spin.raw_duration_ns() >= 300'000);
    // Only a sanity bound: a loaded machine can deschedule the driver's spinning thread.
    CHECK(spin.duration_ns() < 1'000'000'000);
    // Adjacent regions share boundaries and follow each other on one clock.
    CHECK(report.region(0).raw_end_ns() == spin.raw_start_ns());
    CHECK(spin.raw_end_ns() == report.region(2).raw_start_ns());
  }
  for (size_t i = 1; i < reports.size(); ++i) {
    CHECK(reports[i].replay_index() == reports[i - 1].replay_index() + 1);
    CHECK(reports[i].region(0).start_ns() >= reports[i - 1].region(2).end_ns());  // in order
  }

  SUBCASE("debug_dump writes the captured graph") {
    AcceleratorGraph dumped("level_zero");
    dumped.enable_debug_mode();
    graph.reset();
    dumped.capture_begin(stream);
    stream.fill(source, 1);
    dumped.capture_end();
    // One file per process: ctest runs the command_list and forced_command_list entries (same
    // capture path, same directory) at once, and they would overwrite each other's dump.
    const std::string path = "level_zero_dump_" + env("ACCGRAPH_TEST_EXPECT_CAPTURE").substr(0, 3) +
                             "_" + std::to_string(::getpid()) + ".dot";
    dumped.debug_dump(path);
    FILE* file = std::fopen(path.c_str(), "r");
    REQUIRE(file != nullptr);
    char text[256] = {};
    size_t n = std::fread(text, 1, sizeof(text) - 1, file);
    std::fclose(file);
    std::remove(path.c_str());
    CHECK(n > 0);
    CHECK(std::strstr(text, "digraph") != nullptr);
  }
}

TEST_CASE("driver: a replay on another stream is ordered after the previous replay") {
  // The graph reads `value`, spins, then overwrites it: a replay on `second` that did not wait
  // for the one on `first` would read `value` while that replay spins (before its fill) and
  // copy 7. Ordered, every access is ordered and the second replay copies the 9 the first
  // one left, with no data race for ThreadSanitizer to report.
  Stream first = Stream::create("level_zero");
  Stream second = Stream::create("level_zero");
  Buffer seen = Buffer::allocate(first, 64, MemoryKind::Host);
  Buffer value = Buffer::allocate(first, 64, MemoryKind::Device);
  AcceleratorGraph graph("level_zero");
  graph.capture_begin(first);
  first.copy(seen, value);
  first.delay(std::chrono::milliseconds(20));
  first.fill(value, 9);
  graph.capture_end();
  first.fill(value, 7);
  graph.replay(first);   // copies 7, spins, leaves 9
  graph.replay(second);  // waits for the replay on `first`: copies 9
  second.synchronize();
  CHECK(seen.as<uint8_t>()[0] == 9);
  CHECK(seen.as<uint8_t>()[63] == 9);
  first.synchronize();
  CHECK_NOTHROW(graph.reset());
}

TEST_CASE("driver: destroying markers waits for the device work that writes them") {
  // A marker set destroyed while its markers and publishing copies are still queued behind a
  // spin must wait for them (the driver would otherwise write freed memory and signal
  // destroyed events). The fill queued before the last marker shows the wait: it has run when
  // the destructor returns, without any other synchronisation (ThreadSanitizer checks that).
  Backend& backend = Registry::instance().backend("level_zero");
  Stream stream = Stream::create("level_zero");
  Buffer flag = Buffer::allocate(stream, 64, MemoryKind::Host);
  stream.fill(flag, 0);
  stream.synchronize();

  SUBCASE("a published sequence") {
    auto markers = backend.create_markers(0, MarkerOptions{});
    markers->begin_sequence(detail::StreamAccess::impl(stream));
    markers->record(detail::StreamAccess::impl(stream), 0);
    stream.delay(std::chrono::milliseconds(20));
    stream.fill(flag, 1);
    markers->record(detail::StreamAccess::impl(stream), 1);
    markers->end_sequence(detail::StreamAccess::impl(stream));
    markers->after_eager_sequence(detail::StreamAccess::impl(stream), 0);
    markers.reset();
    CHECK(flag.as<uint8_t>()[0] == 1);
  }
  SUBCASE("markers appended with no publishing copy after them") {
    auto markers = backend.create_markers(0, MarkerOptions{});
    markers->begin_sequence(detail::StreamAccess::impl(stream));
    markers->record(detail::StreamAccess::impl(stream), 0);
    stream.delay(std::chrono::milliseconds(20));
    stream.fill(flag, 2);
    markers->record(detail::StreamAccess::impl(stream), 1);
    markers.reset();
    CHECK(flag.as<uint8_t>()[0] == 2);
  }
  SUBCASE("completion is observed through is_complete, then the stamps are read") {
    auto markers = backend.create_markers(0, MarkerOptions{});
    markers->begin_sequence(detail::StreamAccess::impl(stream));
    markers->record(detail::StreamAccess::impl(stream), 0);
    stream.delay(std::chrono::milliseconds(2));
    stream.fill(flag, 3);
    markers->record(detail::StreamAccess::impl(stream), 1);
    markers->end_sequence(detail::StreamAccess::impl(stream));
    markers->after_eager_sequence(detail::StreamAccess::impl(stream), 0);
    while (!markers->is_complete(0)) std::this_thread::yield();
    CHECK(flag.as<uint8_t>()[0] == 3);
    uint64_t ns[2] = {};
    markers->read(0, ns, 2);
    CHECK(ns[1] - ns[0] >= 2'000'000);
  }
}

TEST_CASE("driver: a profiler destroyed right after eager regions and replays") {
  // Run under ThreadSanitizer in CI: each profiler's marker sets are destroyed while the
  // driver may still be signalling their events (audit row 1.4).
  Stream stream = Stream::create("level_zero");
  Buffer a = Buffer::allocate(stream, 4096, MemoryKind::Device);
  Buffer b = Buffer::allocate(stream, 4096, MemoryKind::Device);
  for (int round = 0; round < 20; ++round) {
    AcceleratorGraph graph("level_zero");
    {
      timing::Profiler profiler;
      profiler.attach(graph);
      {
        auto r = profiler.region(stream, "eager");
        stream.fill(a, static_cast<uint8_t>(round));
      }
      graph.capture_begin(stream);
      {
        auto r = profiler.region(stream, "captured");
        stream.copy(b, a);
      }
      graph.capture_end();
      graph.replay(stream);
      graph.replay(stream);
      {
        auto r = profiler.region(stream, "eager again");
        stream.fill(a, 1);
      }
    }
    graph.replay(stream);  // the graph's markers outlive the profiler (kept until exit)
  }
  stream.synchronize();
  CHECK(a.as<uint8_t>() != nullptr);
}

TEST_CASE("driver: a wrapped stream must not outlive the stream it wraps") {
  auto owner = std::make_unique<Stream>(Stream::create("level_zero"));
  Buffer buffer = Buffer::allocate(*owner, 64, MemoryKind::Host);
  Stream wrapped = Stream::wrap("level_zero", 0, owner->native_handle());
  // While the owner lives, the wrapper is the same queue.
  wrapped.fill(buffer, 5);
  wrapped.synchronize();
  CHECK(buffer.as<uint8_t>()[0] == 5);
  Stream again = Stream::wrap("level_zero", 0, wrapped.native_handle());
  again.fill(buffer, 6);
  again.synchronize();
  CHECK(buffer.as<uint8_t>()[0] == 6);

  owner.reset();  // destroys the list both wrappers use
  const char* kOutlive = "a wrapped stream must not outlive the stream it wraps";
  CHECK_ACCGRAPH_ERROR(wrapped.fill(buffer, 7), ErrorCode::InvalidState, kOutlive);
  CHECK_ACCGRAPH_ERROR(wrapped.fill(buffer, 7), ErrorCode::InvalidState,
                       "fill: this stream wraps command list");
  CHECK_ACCGRAPH_ERROR(wrapped.copy(buffer.data(), buffer.data(), 8), ErrorCode::InvalidState,
                       kOutlive);
  CHECK_ACCGRAPH_ERROR(wrapped.delay(std::chrono::microseconds(1)), ErrorCode::InvalidState,
                       kOutlive);
  CHECK_ACCGRAPH_ERROR(wrapped.synchronize(), ErrorCode::InvalidState, kOutlive);
  CHECK_ACCGRAPH_ERROR(again.fill(buffer, 7), ErrorCode::InvalidState, kOutlive);
  Stream live = Stream::create("level_zero");
  CHECK_ACCGRAPH_ERROR(live.wait(wrapped), ErrorCode::InvalidState, kOutlive);
  CHECK_ACCGRAPH_ERROR(wrapped.wait(live), ErrorCode::InvalidState, kOutlive);
  AcceleratorGraph graph("level_zero");
  CHECK_ACCGRAPH_ERROR(graph.capture_begin(wrapped), ErrorCode::InvalidState, kOutlive);
  timing::Profiler profiler;
  CHECK_ACCGRAPH_ERROR(profiler.begin(wrapped, "region"), ErrorCode::InvalidState, kOutlive);
  CHECK(buffer.as<uint8_t>()[0] == 6);  // nothing ran
  live.fill(buffer, 8);                 // other streams are unaffected
  live.synchronize();
  CHECK(buffer.as<uint8_t>()[0] == 8);
}  // destroying the wrappers does not touch the dead list

TEST_CASE("driver: timestamps that wrap around still give durations") {
  // The CPU driver's counter is steady_clock's ns masked to the valid bits (device_ticks in
  // ze_cpu_driver/driver.cpp), so this process knows where the wraparounds fall: each 2 ms
  // region starts about 1 ms before one, and straddles it unless the thread is delayed. 26
  // bits (a 67 ms period) leave a wide margin on a loaded machine, and a sequence that did take
  // longer than a period must come back unmeasurable, never short (Note [Counter period]).
  const uint64_t bits = required_valid_bits();
  REQUIRE_MESSAGE(bits >= 26, "run this case with ZE_ACCGRAPH_CPU_VALID_BITS >= 26");
  const uint64_t period = uint64_t{1} << bits;
  constexpr uint64_t kSpinNs = 2'000'000;
  constexpr uint64_t kLeadNs = 1'000'000;  // start this long before a wraparound
  Backend& backend = Registry::instance().backend("level_zero");
  Stream stream = Stream::create("level_zero");
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(0, MarkerOptions{});
  constexpr int kSequences = 12;
  int wrapped = 0;
  for (uint64_t sequence = 0; sequence < kSequences; ++sequence) {
    for (;;) {  // until the counter is 1.0-1.5 ms before its next wraparound
      const uint64_t phase = steady_ns() & (period - 1);
      if (phase >= period - kLeadNs - 500'000 && phase < period - kLeadNs) break;
      const uint64_t until = period - kLeadNs - 400'000;
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(phase < until ? until - phase : period - phase + until));
    }
    const uint64_t host_begin = steady_ns();
    std::vector<uint64_t> ns =
        timed_spin(*markers, stream, sequence, std::chrono::nanoseconds(kSpinNs));
    const uint64_t host_window = steady_ns() - host_begin;
    REQUIRE(ns.size() == 2);
    if (ns[0] == TimestampMarkers::kUnmeasurable) {
      // Only a sequence that really took about a period may be refused.
      CHECK(ns[1] == TimestampMarkers::kUnmeasurable);
      CHECK(host_window >= period / 2);
      MESSAGE("sequence " << sequence << " took " << host_window << " ns: unmeasurable");
      continue;
    }
    CHECK(ns[0] < period);  // the first stamp is its masked value
    CHECK(ns[1] - ns[0] >= kSpinNs);
    CHECK(ns[1] - ns[0] < period);
    if (ns[1] >= period) ++wrapped;  // the raw second stamp was smaller than the first
  }
  MESSAGE(wrapped << " of " << kSequences << " sequences straddled a wraparound");
  CHECK(wrapped > 0);
}

TEST_CASE("driver: a region longer than the counter's wrap period is unmeasurable") {
  // Row 5.2 of the audit: with a short counter, a region longer than one period used to come
  // out short by whole periods, silently. Now read() answers kUnmeasurable and warns once per
  // marker set, naming the period and the variable that shortened it.
  const uint64_t bits = required_valid_bits();
  const uint64_t period = uint64_t{1} << bits;  // 1 ns ticks
  CapturedWarnings warnings;
  Backend& backend = Registry::instance().backend("level_zero");
  Stream stream = Stream::create("level_zero");
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(0, MarkerOptions{});
  const auto long_spin = std::chrono::nanoseconds(std::max<uint64_t>(2 * period, 2'000'000));
  std::vector<uint64_t> ns = timed_spin(*markers, stream, 0, long_spin);
  CHECK(ns == std::vector<uint64_t>(2, TimestampMarkers::kUnmeasurable));
  std::vector<std::string> warned = warnings.containing("cannot be placed");
  REQUIRE(warned.size() == 1);
  CHECK(warned[0].find("valid bits") != std::string::npos);
  CHECK(warned[0].find("wraps every") != std::string::npos);
  CHECK(warned[0].find("ZE_ACCGRAPH_CPU_VALID_BITS (now " + std::to_string(bits) + ")") !=
        std::string::npos);
  ns = timed_spin(*markers, stream, 1, long_spin);
  CHECK(ns == std::vector<uint64_t>(2, TimestampMarkers::kUnmeasurable));
  CHECK(warnings.containing("cannot be placed").size() == 1);  // once per marker set

  // A region well inside one period is exact (checked when the period leaves room for it).
  if (period >= 32'000'000) {
    const uint64_t spin = period / 16;
    const uint64_t host_begin = steady_ns();
    ns = timed_spin(*markers, stream, 2, std::chrono::nanoseconds(spin));
    const uint64_t host_window = steady_ns() - host_begin;
    if (host_window < period / 2) {  // not descheduled for a large part of the period
      REQUIRE(ns[0] != TimestampMarkers::kUnmeasurable);
      CHECK(ns[1] - ns[0] >= spin);
      CHECK(ns[1] - ns[0] <= host_window);
    }
  }
}

TEST_CASE("driver: errors name the call and the ze_result_t") {
  Backend& backend = Registry::instance().backend("level_zero");
  try {
    // 4 EiB: the driver answers ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY.
    Buffer::allocate("level_zero", 0, size_t{1} << 62, MemoryKind::Device);
    FAIL("a 4 EiB allocation succeeded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::BackendError);
    CHECK(e.backend() == "level_zero");
    CHECK(e.native_call() == "zeMemAllocDevice");
    CHECK(e.native_code() == "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY");
    CHECK(e.message() ==
          "allocating 4611686018427387904 bytes of device memory on device 0: "
          "zeMemAllocDevice failed with ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (out "
          "of device memory)");
  }
  try {
    backend.wrap_stream(0, nullptr);
    FAIL("wrap_stream(nullptr) did not fail");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(e.message().find("the native handle is null") != std::string::npos);
  }
  try {
    backend.create_markers(0, MarkerOptions{"external_events", 0});
    FAIL("an unknown strategy was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(e.message() ==
          "create_markers: unknown marker strategy 'external_events': the "
          "level_zero backend offers 'global_timestamps'");
  }
}
