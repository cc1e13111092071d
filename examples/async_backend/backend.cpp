// The async backend object: one device, its capabilities, and the factories of its streams,
// buffers, graphs and markers. Start reading here, then async.hpp (Note [Lanes]).
#include "async.hpp"

#include <accgraph/spi/device_index.hpp>
#include <accgraph/spi/handle_table.hpp>
#include <accgraph/spi/host_memory_buffer.hpp>

namespace async_backend {

namespace {

using accgraph::Capabilities;
using accgraph::CaptureMode;

class AsyncBackend final : public accgraph::Backend {
 public:
  std::string name() const override { return kBackendName; }

  std::vector<accgraph::DeviceInfo> devices() const override {
    return {accgraph::DeviceInfo{0, kDeviceName}};
  }

  Capabilities capabilities(int device) const override {
    check_device(device, "capabilities");
    Capabilities caps;
    // Global only: the backend does not track which thread enqueued what, so it does not
    // promise the ThreadLocal or Relaxed rules; the core refuses them with Unsupported.
    caps.capture_modes = {CaptureMode::Global};
    caps.multi_stream_capture = true;  // fork/join through wait_for (Note [Lanes])
    caps.host_calls = true;
    caps.timed_delay = true;  // a sleep, then a spin, on the worker
    caps.graph_update = false;
    caps.pool_sharing = true;
    caps.marker_strategies = {kMarkerStrategy};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = 1;
    return caps;
  }

  std::unique_ptr<accgraph::StreamImpl> create_stream(int device) override {
    check_device(device, "create_stream");
    return std::make_unique<AsyncStream>(queues_.add(std::make_shared<WorkQueue>()));
  }

  // Looked up, never trusted: a wrong pointer would be a wild one (Note [Live handles]).
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int device, void* native_handle) override {
    check_device(device, "wrap_stream");
    return std::make_unique<AsyncStream>(queues_.require_live(native_handle));
  }

  std::unique_ptr<accgraph::BufferImpl> allocate(int device, size_t bytes,
                                                 accgraph::MemoryKind kind) override {
    check_device(device, "allocate");
    // The async device is the CPU: its memory is ordinary memory.
    return std::make_unique<accgraph::HostMemoryBuffer>(bytes, kind, kBackendName);
  }

  std::unique_ptr<accgraph::GraphImplInterface> create_graph(
      const accgraph::GraphArgs& args) override {
    return std::make_unique<AsyncGraph>(pools_, args);
  }

  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int device, const accgraph::MarkerOptions& options) override {
    check_device(device, "create_markers");
    options.resolve_strategy({kMarkerStrategy}, kBackendName);
    return make_markers(options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName));
  }

 private:
  static void check_device(int device, const char* operation) {
    accgraph::check_device_index(device, 1, kBackendName, operation);
  }

  accgraph::HandleTable<WorkQueue> queues_{kBackendName};
  Pools pools_{kBackendName};
};

}  // namespace

std::unique_ptr<accgraph::Backend> make_backend() { return std::make_unique<AsyncBackend>(); }

}  // namespace async_backend
