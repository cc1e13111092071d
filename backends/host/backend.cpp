// The host backend object: one device (the CPU), honest capabilities, and the factories of its
// streams, buffers, graphs and markers. Start here when writing a backend plugin.
#include <fmt/format.h>

#include "host_backend.hpp"
#include "host_internal.hpp"

namespace accgraph::detail::host {

namespace {

class HostBackend final : public Backend {
 public:
  std::string name() const override { return kBackendName; }

  std::vector<DeviceInfo> devices() const override { return {DeviceInfo{0, kDeviceName}}; }

  Capabilities capabilities(int device) const override {
    check_device(device, "capabilities");
    Capabilities caps;
    // Nothing is illegal during a host capture, so every mode holds (see HostGraph).
    caps.capture_modes = {CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed};
    caps.multi_stream_capture = true;
    caps.host_calls = true;
    caps.timed_delay = true;
    caps.graph_update = false;  // a re-capture re-records; nothing is updated in place
    caps.pool_sharing = true;
    caps.marker_strategies = {kStrategySteadyClock};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = 1;  // steady_clock is CLOCK_MONOTONIC in ns (markers.cpp)
    return caps;
  }

  std::unique_ptr<StreamImpl> create_stream(int device) override {
    check_device(device, "create_stream");
    return std::make_unique<HostStream>(HostQueue::create(), /*owned=*/true);
  }

  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    check_device(device, "wrap_stream");
    if (native_handle == nullptr)
      throw Error(ErrorCode::InvalidArgument,
                  "wrap_stream: the native handle is null: pass the native_handle() of a live "
                  "host stream",
                  kBackendName);
    std::shared_ptr<HostQueue> queue = HostQueue::find_live(native_handle);
    if (!queue)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("wrap_stream: {} is not a live host queue: pass the "
                              "native_handle() of a host stream that still exists",
                              native_handle),
                  kBackendName);
    return std::make_unique<HostStream>(std::move(queue), /*owned=*/false);
  }

  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    check_device(device, "allocate");
    if (bytes == 0)
      throw Error(ErrorCode::InvalidArgument, "allocate: 0 bytes: ask for at least one byte",
                  kBackendName);
    return std::make_unique<HostBuffer>(bytes, kind);
  }

  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return std::make_unique<HostGraph>(pools_, args);
  }

  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    check_device(device, "create_markers");
    options.resolve_strategy({kStrategySteadyClock}, kBackendName);
    return make_steady_clock_markers(
        options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName));
  }

 private:
  static void check_device(int device, const char* operation) {
    if (device != 0)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: device {} does not exist: the host backend has one device, 0",
                              operation, device),
                  kBackendName);
  }

  PoolRegistry pools_{kBackendName};
};

}  // namespace

}  // namespace accgraph::detail::host

namespace accgraph::detail {

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<host::HostBackend>(); }

}  // namespace accgraph::detail
