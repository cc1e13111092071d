// Tests of the level_zero backend through the real Level Zero loader: without a driver (the
// backend is unavailable with a reason and the rest works), and with the CPU test driver (the
// capture path ctest asked for is the one in use; capture, replay and markers; timestamps that
// wrap around). Each ctest registration selects its cases with --test-case and sets the
// environment they require (see CMakeLists.txt).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "accgraph/accgraph.hpp"

using namespace accgraph;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
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
  REQUIRE_MESSAGE(!expected.empty(), "set ACCGRAPH_TEST_EXPECT_CAPTURE to 'native graphs' or "
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
    REQUIRE(report.regions.size() == 3);
    CHECK(report.backend == "level_zero");
    CHECK(report.marker_strategy == "global_timestamps");
    const timing::RegionTiming& spin = report.regions[1];
    CHECK(spin.name == "spin");
    CHECK(spin.duration_ns >= 300'000);
    // Only a sanity bound: a loaded machine can deschedule the driver's spinning thread.
    CHECK(spin.duration_ns < 1'000'000'000);
    // Adjacent regions share boundaries and follow each other on one clock.
    CHECK(report.regions[0].end_ns == spin.start_ns);
    CHECK(spin.end_ns == report.regions[2].start_ns);
  }
  for (size_t i = 1; i < reports.size(); ++i) {
    CHECK(reports[i].replay_index == reports[i - 1].replay_index + 1);
    CHECK(reports[i].regions[0].start_ns >= reports[i - 1].regions[2].end_ns);  // in order
  }

  SUBCASE("debug_dump writes the captured graph") {
    AcceleratorGraph dumped("level_zero");
    dumped.enable_debug_mode();
    graph.reset();
    dumped.capture_begin(stream);
    stream.fill(source, 1);
    dumped.capture_end();
    const std::string path = "level_zero_dump_" + env("ACCGRAPH_TEST_EXPECT_CAPTURE").substr(0, 3) + ".dot";
    dumped.debug_dump(path);
    FILE* file = std::fopen(path.c_str(), "r");
    REQUIRE(file != nullptr);
    char text[256] = {};
    size_t n = std::fread(text, 1, sizeof(text) - 1, file);
    std::fclose(file);
    CHECK(n > 0);
    CHECK(std::strstr(text, "digraph") != nullptr);
  }
}

TEST_CASE("driver: a replay on another stream is ordered after the previous replay") {
  Stream first = Stream::create("level_zero");
  Stream second = Stream::create("level_zero");
  Buffer counter = Buffer::allocate(first, 64, MemoryKind::Host);
  Buffer value = Buffer::allocate(first, 64, MemoryKind::Device);
  AcceleratorGraph graph("level_zero");
  graph.capture_begin(first);
  first.delay(std::chrono::milliseconds(5));
  first.copy(counter, value);
  graph.capture_end();
  first.fill(value, 7);
  graph.replay(first);   // ends by copying 7
  second.fill(value, 9); // second does not wait for first here...
  graph.replay(second);  // ...but this replay waits for the one on `first`
  second.synchronize();
  // Whatever the fill on `second` raced with, the last replay ran after the first one ended.
  CHECK((counter.as<uint8_t>()[0] == 9 || counter.as<uint8_t>()[0] == 7));
  first.synchronize();
  CHECK_NOTHROW(graph.reset());
}

TEST_CASE("driver: timestamps that wrap around still give durations") {
  const std::string bits = env("ZE_ACCGRAPH_CPU_VALID_BITS");
  REQUIRE_MESSAGE(bits == "24", "run this case with ZE_ACCGRAPH_CPU_VALID_BITS=24");
  // 24 valid bits of 1 ns ticks: the counter wraps every 16.8 ms, so about one in eight of these
  // 2 ms regions straddles a wraparound (all 80 miss one with probability ~3e-5); unmasked,
  // their raw difference would be ~2^64 ns. A region longer than a period (the spinning thread
  // descheduled for 14 ms) cannot be measured, by any masking: the period leaves that margin.
  constexpr uint64_t kPeriod = uint64_t{1} << 24;
  constexpr uint64_t kSpinNs = 2'000'000;
  Backend& backend = Registry::instance().backend("level_zero");
  Stream stream = Stream::create("level_zero");
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(0, MarkerOptions{});
  int wrapped = 0;
  for (uint64_t sequence = 0; sequence < 80; ++sequence) {
    markers->begin_sequence(stream.impl());
    markers->record(stream.impl(), 0);
    stream.delay(std::chrono::nanoseconds(kSpinNs));
    markers->record(stream.impl(), 1);
    markers->end_sequence(stream.impl());
    markers->after_eager_sequence(stream.impl(), sequence);
    markers->wait(sequence);
    CHECK(markers->is_complete(sequence));
    std::vector<uint64_t> ns = markers->read(sequence, 2);
    REQUIRE(ns.size() == 2);
    CHECK(ns[0] < kPeriod);  // the first stamp is its masked value
    CHECK(ns[1] - ns[0] >= kSpinNs);
    CHECK(ns[1] - ns[0] < kPeriod);
    if (ns[1] >= kPeriod) ++wrapped;  // the raw second stamp was smaller than the first
  }
  MESSAGE(wrapped << " of 80 sequences straddled a wraparound");
  CHECK(wrapped > 0);
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
    CHECK(e.message() == "allocating 4611686018427387904 bytes of device memory on device 0: "
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
    CHECK(e.message() == "create_markers: unknown marker strategy 'external_events': the "
                         "level_zero backend offers 'global_timestamps'");
  }
}
