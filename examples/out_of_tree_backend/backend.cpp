// The toy backend object: one device, honest capabilities, and the factories of its streams,
// buffers, graphs and markers. Start reading here.
#include "toy.hpp"

#include <accgraph/spi/clock_sampling.hpp>
#include <accgraph/spi/device_index.hpp>
#include <accgraph/spi/handle_table.hpp>
#include <accgraph/spi/host_memory_buffer.hpp>
#include <accgraph/spi/steady_clock_markers.hpp>

namespace toy {

void fail(accgraph::ErrorCode code, const std::string& message) {
  throw accgraph::Error(code, message, kBackendName);
}

namespace {

using accgraph::Capabilities;
using accgraph::CaptureMode;
using accgraph::ErrorCode;

// ClockSampling (optional, accgraph/spi/clock_sampling.hpp): lets accgraph::timing::calibrate_clock
// put the toy's marker times on the host's clock when traces of several devices or ranks are
// merged.
class ToyBackend final : public accgraph::Backend, public accgraph::ClockSampling {
 public:
  std::string name() const override { return kBackendName; }

  std::vector<accgraph::DeviceInfo> devices() const override {
    return {accgraph::DeviceInfo{0, kDeviceName}};
  }

  Capabilities capabilities(int device) const override {
    check_device(device, "capabilities");
    Capabilities caps;
    // Only Global: the toy cannot tell which thread enqueued what, so it cannot promise the
    // ThreadLocal/Relaxed rules. Listing only what is honoured makes the core refuse the others
    // with Unsupported (never a silent fallback).
    caps.capture_modes = {CaptureMode::Global};
    caps.multi_stream_capture = false;  // a capture lives on one stream (see ToyStream::wait_for)
    caps.host_calls = true;
    caps.timed_delay = true;  // sleep, then busy-wait to the deadline (stream.cpp)
    caps.graph_update = false;
    caps.pool_sharing = true;
    caps.marker_strategies = {kMarkerStrategy};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = 1;  // steady_clock counts nanoseconds (markers.cpp)
    return caps;
  }

  std::unique_ptr<accgraph::StreamImpl> create_stream(int device) override {
    check_device(device, "create_stream");
    return std::make_unique<ToyStream>(queues_.add(std::make_shared<ToyQueue>()));
  }

  // The handle must be the native_handle() of a live toy stream: anything else would be a
  // wild pointer, so it is looked up rather than trusted (Note [Live handles]).
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int device, void* native_handle) override {
    check_device(device, "wrap_stream");
    return std::make_unique<ToyStream>(queues_.require_live(native_handle));
  }

  std::unique_ptr<accgraph::BufferImpl> allocate(int device, size_t bytes,
                                                 accgraph::MemoryKind kind) override {
    check_device(device, "allocate");
    // "Device" memory is ordinary memory: the toy device is the CPU that calls it.
    return std::make_unique<accgraph::HostMemoryBuffer>(bytes, kind, kBackendName);
  }

  std::unique_ptr<accgraph::GraphImplInterface> create_graph(
      const accgraph::GraphArgs& args) override {
    return std::make_unique<ToyGraph>(pools_, args);
  }

  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int device, const accgraph::MarkerOptions& options) override {
    check_device(device, "create_markers");
    // The SPI's helpers turn an unknown strategy or too deep a ring into the standard errors.
    options.resolve_strategy({kMarkerStrategy}, kBackendName);
    return make_markers(options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName));
  }

  // The markers read steady_clock on the host (markers.cpp): the SPI helper samples it.
  void sample_clock(int /*device*/, accgraph::timing::ClockSample* samples, size_t count) override {
    accgraph::sample_steady_clock(samples, count);
  }

 private:
  static void check_device(int device, const char* operation) {
    accgraph::check_device_index(device, 1, kBackendName, operation);
  }

  accgraph::HandleTable<ToyQueue> queues_{kBackendName};  // thread-safe
  Pools pools_{kBackendName, kPoolTag};
};

}  // namespace

std::unique_ptr<accgraph::Backend> make_backend() { return std::make_unique<ToyBackend>(); }

}  // namespace toy
