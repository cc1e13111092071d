// The host backend object: one device (the CPU), honest capabilities, and the factories of its
// streams, buffers, graphs and markers.
#include "host_backend.hpp"

#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/spi/steady_clock_markers.hpp"

namespace accgraph::detail::host {

namespace {

class HostBackend final : public Backend, public ClockSampling, public DlpackDevices {
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
    return std::make_unique<HostStream>(HostQueue::create(), Ownership::Owned);
  }

  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    check_device(device, "wrap_stream");
    return std::make_unique<HostStream>(live_queues().require_live(native_handle),
                                        Ownership::Borrowed);
  }

  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    check_device(device, "allocate");
    if (bytes == 0)
      throw Error(ErrorCode::InvalidArgument, "allocate: 0 bytes: ask for at least one byte",
                  kBackendName);
    // Device and Host kinds alike: the "device" of the host backend is the CPU.
    return std::make_unique<HostMemoryBuffer>(bytes, kind, kBackendName);
  }

  // Note [DLPack devices] (spi/dlpack_device.hpp): all of its memory is the CPU's.
  DlpackDevice dlpack_device(int /*device*/, MemoryKind /*kind*/) const noexcept override {
    return {dlpack::kDLCPU, 0};
  }

  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return std::make_unique<HostGraph>(pools_, args);
  }

  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    check_device(device, "create_markers");
    options.resolve_strategy({kStrategySteadyClock}, kBackendName);
    return make_markers(options);
  }

  // The markers' clock is steady_clock, read by this thread itself: round trips of tens of ns.
  void sample_clock(int /*device*/, timing::ClockSample* samples, size_t count) override {
    sample_steady_clock(samples, count);
  }

 private:
  static void check_device(int device, const char* operation) {
    check_device_index(device, 1, kBackendName, operation);
  }

  Pools pools_{kBackendName};
};

}  // namespace

}  // namespace accgraph::detail::host

namespace accgraph::detail {

// The built-in list's entry point, declared by the registry (registry/registry_internal.hpp):
// this backend includes only the SPI, and the registry no backend header.
std::unique_ptr<Backend> make_host_backend() { return std::make_unique<host::HostBackend>(); }

}  // namespace accgraph::detail
