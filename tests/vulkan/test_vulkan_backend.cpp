// Tests of the vulkan backend through the real Vulkan loader: without a driver (the backend is
// unavailable with a reason and the rest works), and with a driver (lavapipe in CI, selected by
// VK_DRIVER_FILES in ctest's environment): devices and capabilities, capture and replay with
// timed regions and the spin shader, unaligned fills, addresses the backend does not own,
// wrap_stream, more streams than queues, and debug_dump. Each ctest registration selects its
// cases with --test-case and sets the environment they require (see CMakeLists.txt).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "check_error.hpp"

using namespace accgraph;

namespace {

BackendStatus vulkan_status() {
  for (const BackendStatus& status : Registry::instance().status())
    if (status.name == "vulkan") return status;
  FAIL("vulkan is not registered at all");
  return {};
}

/// Collects what accgraph logs (every level) while it exists.
class CapturedLog {
 public:
  CapturedLog() { set_log_handler(&CapturedLog::handle, this); }
  ~CapturedLog() { set_log_handler(nullptr); }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string text;
    for (const std::string& m : messages_) text += m + "\n";
    return text;
  }

 private:
  static void handle(LogLevel, const char* message, void* self) {
    auto* log = static_cast<CapturedLog*>(self);
    std::lock_guard<std::mutex> lock(log->mutex_);
    log->messages_.emplace_back(message);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

std::vector<uint8_t> read_back(Stream& stream, const Buffer& buffer) {
  Buffer host = Buffer::allocate(stream, buffer.size(), MemoryKind::Host);
  stream.copy(host.data(), buffer.data(), buffer.size());
  stream.synchronize();
  return std::vector<uint8_t>(host.as<uint8_t>(), host.as<uint8_t>() + buffer.size());
}

}  // namespace

TEST_CASE("no driver: vulkan is unavailable with a reason, host still works") {
  const char* files = std::getenv("VK_DRIVER_FILES");
  REQUIRE_MESSAGE(files != nullptr, "run this case with VK_DRIVER_FILES naming no driver");
  BackendStatus status = vulkan_status();
  CHECK_FALSE(status.available);
  INFO("reason: " << status.unavailable_reason);
  if (status.unavailable_reason.find("libvulkan.so.1 could not be loaded") != std::string::npos) {
    // A machine without the loader: that reason, with what to install.
    CHECK(status.unavailable_reason.find("Debian: libvulkan1") != std::string::npos);
  } else {
    CHECK(status.unavailable_reason.find("vkCreateInstance failed with "
                                         "VK_ERROR_INCOMPATIBLE_DRIVER") != std::string::npos);
    CHECK(status.unavailable_reason.find("VK_DRIVER_FILES=") != std::string::npos);
    CHECK_ACCGRAPH_ERROR(Registry::instance().backend("vulkan"), ErrorCode::Unavailable,
                         "no usable driver");
  }
  CHECK(default_backend_name() != "vulkan");

  Stream stream = Stream::create("host");
  Buffer a = Buffer::allocate(stream, 64, MemoryKind::Host);
  Buffer b = Buffer::allocate(stream, 64, MemoryKind::Host);
  stream.fill(a, 0x5a);
  stream.copy(b, a);
  stream.synchronize();
  CHECK(b.as<uint8_t>()[63] == 0x5a);
}

TEST_CASE("driver: devices and capabilities") {
  CapturedLog log;
  Backend& backend = Registry::instance().backend("vulkan");  // first use: start-up logs here
  MESSAGE("start-up log:\n" << log.all());
  BackendStatus status = vulkan_status();
  REQUIRE_MESSAGE(status.available, status.unavailable_reason);
  REQUIRE(status.devices.size() >= 1);
  const std::string expected = std::getenv("ACCGRAPH_TEST_VULKAN_DEVICE")
                                   ? std::getenv("ACCGRAPH_TEST_VULKAN_DEVICE")
                                   : "llvmpipe";
  CHECK_MESSAGE(status.devices[0].name.find(expected) != std::string::npos,
                "device 0 is '" << status.devices[0].name << "'");
  const Capabilities caps = backend.capabilities(0);
  CHECK(caps.marker_strategies == std::vector<std::string>{"timestamp_queries"});
  CHECK(caps.marker_ring_depth == 16);
  CHECK(caps.timer_resolution_ns >= 1);
  CHECK(caps.supports(CaptureMode::ThreadLocal));
  CHECK(caps.supports(CaptureMode::Relaxed));
  CHECK_FALSE(caps.host_calls);
  CHECK_FALSE(caps.multi_stream_capture);
  CHECK_FALSE(caps.pool_sharing);
  // Built with glslangValidator (CI installs glslang-tools), on a device with shaderDeviceClock.
  if (std::getenv("ACCGRAPH_TEST_VULKAN_EXPECT_DELAY") != nullptr) CHECK(caps.timed_delay);
  CHECK(clock_sampling(backend) != nullptr);
}

TEST_CASE("driver: capture, replay and timed regions") {
  Stream stream = Stream::create("vulkan");
  Buffer source = Buffer::allocate(stream, 4096, MemoryKind::Device);
  Buffer destination = Buffer::allocate(stream, 4096, MemoryKind::Device);
  const bool with_delay = stream.capabilities().timed_delay;
  // On lavapipe (a CPU device) a 300 us spin between two timestamp queries measured 292-299 us in
  // about 1 of 10 runs when more processes than cores ran (two tests and a build on 2 cores), with
  // any calibration margin: the queries, not the spin's length, are off by a few percent there.
  // The conformance suite keeps the exact bound (caps.honest); this test allows 5% on a CPU
  // device, never on a GPU.
  const bool cpu_device = Registry::instance().backend("vulkan").devices().at(0).name.find(
                              "llvmpipe") != std::string::npos;
  const uint64_t spin_floor_ns = cpu_device ? 285'000 : 300'000;

  stream.fill(destination, 0);
  timing::Profiler profiler;
  AcceleratorGraph graph("vulkan");
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto r = profiler.region(stream, "fill");
    stream.fill(source, 0x42);
  }
  {
    auto r = profiler.region(stream, "spin");
    if (with_delay) stream.delay(std::chrono::microseconds(300));
  }
  {
    auto r = profiler.region(stream, "copy");
    stream.copy(destination, source);
  }
  graph.capture_end();
  CHECK(read_back(stream, destination)[0] == 0);  // capturing did not run the work

  constexpr int kReplays = 40;  // more than the ring depth (16): slots are reused
  for (int i = 0; i < kReplays; ++i) graph.replay();
  profiler.flush();
  CHECK(read_back(stream, destination)[4095] == 0x42);

  std::vector<timing::ReplayReport> reports = profiler.reports();
  REQUIRE(reports.size() == kReplays);
  for (const timing::ReplayReport& report : reports) {
    REQUIRE(report.size() == 3);
    CHECK(report.backend() == "vulkan");
    CHECK(report.marker_strategy() == "timestamp_queries");
    const timing::RegionTiming& spin = report.region(1);
    REQUIRE(spin.measurable());
    if (with_delay) CHECK(spin.raw_duration_ns() >= spin_floor_ns);
    CHECK(spin.duration_ns() < 1'000'000'000);
    CHECK(report.region(0).raw_end_ns() == spin.raw_start_ns());
    CHECK(spin.raw_end_ns() == report.region(2).raw_start_ns());
  }
  for (size_t i = 1; i < reports.size(); ++i)
    CHECK(reports[i].region(0).start_ns() >= reports[i - 1].region(2).end_ns());  // in order
  if (!with_delay) MESSAGE("no timed_delay here: the spin region was empty");
}

TEST_CASE("driver: fills and copies at any offset and size, eagerly and captured") {
  Stream stream = Stream::create("vulkan");
  Buffer data = Buffer::allocate(stream, 64, MemoryKind::Device);
  Buffer host = Buffer::allocate(stream, 64, MemoryKind::Host);
  auto expect = [&](const std::vector<uint8_t>& bytes, size_t offset, size_t count, uint8_t value) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      const uint8_t want = i >= offset && i < offset + count ? value : 0;
      if (bytes[i] != want) {
        FAIL_CHECK("offset " << offset << " count " << count << ": byte " << i << " is "
                             << int(bytes[i]) << ", not " << int(want));
        return;
      }
    }
  };
  for (size_t offset : {0, 1, 2, 3, 5}) {
    for (size_t count : {1, 2, 3, 5, 7, 9, 30}) {
      stream.fill(data, 0);
      stream.fill(data.as<uint8_t>() + offset, static_cast<uint8_t>(offset + count), count);
      expect(read_back(stream, data), offset, count, static_cast<uint8_t>(offset + count));
    }
  }
  // Captured: an odd fill, and a copy at odd offsets into a host buffer.
  stream.fill(data, 0);
  stream.synchronize();
  AcceleratorGraph graph("vulkan");
  graph.capture_begin(stream);
  stream.fill(data.as<uint8_t>() + 3, 0x77, 13);
  stream.copy(host.as<uint8_t>() + 1, data.as<uint8_t>() + 3, 13);
  graph.capture_end();
  graph.replay();
  stream.synchronize();
  std::vector<uint8_t> bytes(host.as<uint8_t>(), host.as<uint8_t>() + 64);
  expect(bytes, 1, 13, 0x77);
}

TEST_CASE("driver: memory the backend does not own is refused with InvalidArgument") {
  Stream stream = Stream::create("vulkan");
  Buffer data = Buffer::allocate(stream, 64, MemoryKind::Device);
  std::vector<uint8_t> plain(64);
  CHECK_ACCGRAPH_ERROR(stream.copy(plain.data(), data.data(), 64), ErrorCode::InvalidArgument,
                       "is not inside one vulkan buffer");
  CHECK_ACCGRAPH_ERROR(stream.copy(data.data(), data.as<uint8_t>() + 1, 64),
                       ErrorCode::InvalidArgument, "the source range");
  CHECK_ACCGRAPH_ERROR(stream.fill(plain.data(), 1, 8), ErrorCode::InvalidArgument,
                       "Buffer::allocate on a vulkan stream");
}

TEST_CASE("driver: wrap_stream takes a queue of the backend's device only") {
  Stream stream = Stream::create("vulkan");
  int not_a_queue = 0;
  CHECK_ACCGRAPH_ERROR(Stream::wrap("vulkan", 0, &not_a_queue), ErrorCode::InvalidArgument,
                       "is not a VkQueue of vulkan device 0");
  Stream wrapper = Stream::wrap("vulkan", 0, stream.native_handle());
  CHECK(wrapper.native_handle() == stream.native_handle());
}

TEST_CASE("driver: more streams than queues keep each stream's order, and wait_for orders") {
  std::vector<Stream> streams;
  for (int i = 0; i < 5; ++i) streams.push_back(Stream::create("vulkan"));
  Buffer a = Buffer::allocate(streams[0], 4096, MemoryKind::Device);
  Buffer b = Buffer::allocate(streams[0], 4096, MemoryKind::Device);
  for (uint8_t round = 1; round <= 20; ++round) {
    Stream& first = streams[round % streams.size()];
    Stream& second = streams[(round + 1) % streams.size()];
    first.fill(a, round);
    second.wait(first);
    second.copy(b, a);
    first.wait(second);
  }
  streams[0].wait(streams[1]);
  streams[0].wait(streams[2]);
  CHECK(read_back(streams[0], b)[100] == 20);
}

TEST_CASE("driver: debug_dump lists the recorded commands") {
  Stream stream = Stream::create("vulkan");
  Buffer data = Buffer::allocate(stream, 4096, MemoryKind::Device);
  AcceleratorGraph graph("vulkan");
  graph.enable_debug_mode();
  graph.capture_begin(stream);
  stream.fill(data, 1);
  stream.fill(data.as<uint8_t>() + 1, 2, 10);
  graph.capture_end();
  const std::string path = "vulkan_debug_dump_" + std::to_string(::getpid()) + ".txt";
  graph.debug_dump(path);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  INFO(text);
  CHECK(text.find("2 operations") != std::string::npos);
  CHECK(text.find("vkCmdFillBuffer") != std::string::npos);
  CHECK(text.find("vkCmdCopyBuffer") != std::string::npos);  // the unaligned head
}
