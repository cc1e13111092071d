// The CUDA backend object: device discovery, availability (no driver / no device / driver too
// old), capabilities, the factories of streams, buffers, graphs and markers, and the plugin
// entry point of the module.
#include <cstdlib>
#include <cstring>

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/spi/plugin.hpp"  // ACCGRAPH_DEFINE_PLUGIN and accgraph::priority
#include "accgraph/version.hpp"
#include "cuda_backend.hpp"
#include "cuda_buffer.hpp"
#include "cuda_graph.hpp"
#include "cuda_kernels.hpp"
#include "cuda_markers.hpp"
#include "cuda_stream.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ != device) {
    ACCGRAPH_CUDA_CHECK(cudaSetDevice(device), "selecting the device");
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_ && previous_ >= 0)
    ACCGRAPH_CUDA_LOG(cudaSetDevice(previous_), "restoring the device");
}

RelaxedCaptureModeGuard::RelaxedCaptureModeGuard() {
  ACCGRAPH_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_),
                      "relaxing this thread's capture mode");
}

RelaxedCaptureModeGuard::RelaxedCaptureModeGuard(Teardown) noexcept {
  const cudaError_t err = cudaThreadExchangeStreamCaptureMode(&previous_);
  exchanged_ = err == cudaSuccess;
  if (!exchanged_)
    NativeCall<CudaCall>::log_failure(err, "cudaThreadExchangeStreamCaptureMode",
                                      "relaxing this thread's capture mode to free resources");
}

RelaxedCaptureModeGuard::~RelaxedCaptureModeGuard() {
  if (exchanged_)
    ACCGRAPH_CUDA_LOG(cudaThreadExchangeStreamCaptureMode(&previous_),
                      "restoring this thread's capture mode");
}

cudaStreamCaptureMode to_cuda(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::ThreadLocal:
      return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed:
      return cudaStreamCaptureModeRelaxed;
    case CaptureMode::Default:  // Global is the documented default (as in CUDA and PyTorch)
    case CaptureMode::Global:
      break;
  }
  return cudaStreamCaptureModeGlobal;
}

namespace {

/// An on/off switch from the environment for the device-timestamp markers: unset or empty gives
/// `fallback`, 1 is on, 0 is off. ACCGRAPH_CUDA_PROGRAMMATIC_MARKERS=0 launches them as plain
/// kernels (Note [Programmatic markers] in kernels.cu).
bool marker_switch(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  if (std::strcmp(value, "1") == 0) return true;
  if (std::strcmp(value, "0") == 0) return false;
  log(LogLevel::Warning, fmt::format("cuda: ignoring {}='{}': use 0 or 1", name, value));
  return fallback;
}

/// ACCGRAPH_CUDA_MARKER_PLACEMENT: `exact` (unset: the default), `launch_completion` (the
/// kernel after a marker waits only for the marker to have begun: cheaper on the placement
/// probe's kernels, but not exact before short kernels; for comparisons) or `chained` (each
/// captured marker stays a link of its stream's chain, as before exact placement).
/// Note [Exact marker placement] in capture_helpers.cpp. ACCGRAPH_CUDA_DETACHED_MARKERS, the
/// switch of the detached markers exact placement superseded, is ignored with a warning.
enum class Placement { Exact, LaunchCompletion, Chained };
Placement placement() {
  static const Placement chosen = [] {
    if (const char* detached = std::getenv("ACCGRAPH_CUDA_DETACHED_MARKERS");
        detached != nullptr && *detached != '\0')
      log(LogLevel::Warning,
          fmt::format("cuda: ignoring ACCGRAPH_CUDA_DETACHED_MARKERS='{}': detached markers are "
                      "superseded by exact placement, the default (README \"Marker placement\"); "
                      "unset it",
                      detached));
    const char* value = std::getenv("ACCGRAPH_CUDA_MARKER_PLACEMENT");
    if (value == nullptr || *value == '\0' || std::strcmp(value, "exact") == 0)
      return Placement::Exact;
    if (std::strcmp(value, "launch_completion") == 0) return Placement::LaunchCompletion;
    if (std::strcmp(value, "chained") == 0) return Placement::Chained;
    log(LogLevel::Warning,
        fmt::format("cuda: ignoring ACCGRAPH_CUDA_MARKER_PLACEMENT='{}': use exact, "
                    "launch_completion or chained",
                    value));
    return Placement::Exact;
  }();
  return chosen;
}

std::string version_text(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

struct DeviceEntry {
  DeviceInfo info;
  uint64_t resolution_ns = 0;
  DeviceMarkerModes marker_modes;
};

class CudaBackend final : public Backend, public ClockSampling, public DlpackDevices {
 public:
  explicit CudaBackend(std::vector<DeviceEntry> devices) : devices_(std::move(devices)) {}

  std::string name() const override { return kBackendName; }

  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (const DeviceEntry& d : devices_) out.push_back(d.info);
    return out;
  }

  Capabilities capabilities(int device) const override {
    const DeviceEntry& entry = checked(device, "capabilities");
    Capabilities caps;
    caps.capture_modes = {CaptureMode::Global, CaptureMode::ThreadLocal, CaptureMode::Relaxed};
    caps.multi_stream_capture = true;
    caps.host_calls = true;
    caps.timed_delay = true;
    caps.graph_update = true;
    caps.pool_sharing = true;
    caps.marker_strategies = {kStrategyDeviceTimestamps, kStrategyExternalEvents};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = entry.resolution_ns;
    return caps;
  }

  // Note [DLPack devices] (spi/dlpack_device.hpp): host memory is pinned (cudaMallocHost).
  DlpackDevice dlpack_device(int device, MemoryKind kind) const noexcept override {
    return kind == MemoryKind::Host ? DlpackDevice{dlpack::kDLCUDAHost, 0}
                                    : DlpackDevice{dlpack::kDLCUDA, device};
  }

  std::unique_ptr<StreamImpl> create_stream(int device) override {
    checked(device, "create_stream");
    DeviceGuard guard(device);
    cudaStream_t stream = nullptr;
    // Note [Capture-mode rules]: a capture in Global mode on another thread refuses a stream's
    // creation (and is invalidated by it); a new stream is no part of any capture.
    RelaxedCaptureModeGuard relaxed;
    // Non-blocking: no implicit synchronisation with the legacy default stream, which other
    // libraries in the process may use.
    ACCGRAPH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                        "creating a stream");
    return std::make_unique<CudaStream>(device, stream, Ownership::Owned);
  }

  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    checked(device, "wrap_stream");
    auto stream = static_cast<cudaStream_t>(native_handle);
    // The special handles (legacy, per-thread default) belong to whatever device is current.
    if (stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread) {
      // Note [Capture-mode rules]: a query of the stream's device, from a thread that may not
      // be the one capturing (accgraph.torch wraps PyTorch's streams where they are first used).
      RelaxedCaptureModeGuard relaxed;
      int stream_device = -1;
      ACCGRAPH_CUDA_CHECK(cudaStreamGetDevice(stream, &stream_device),
                          "wrap_stream: reading the stream's device (is it a valid cudaStream_t?)");
      if (stream_device != device)
        throw Error(ErrorCode::InvalidArgument,
                    fmt::format("wrap_stream: the cudaStream_t belongs to device {} but device {} "
                                "was given: pass the stream's own device",
                                stream_device, device),
                    kBackendName);
    }
    return std::make_unique<CudaStream>(device, stream, Ownership::Borrowed);
  }

  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    checked(device, "allocate");
    DeviceGuard guard(device);
    std::shared_ptr<CaptureContext> capture = current_capture_context();
    if (kind == MemoryKind::Device && capture != nullptr && capture->device == device) {
      // Note [Graph pools]: during a capture on this thread, device allocations become graph
      // allocation nodes drawn with the capture's pool (stream-ordered, legal in every mode).
      void* data = nullptr;
      ACCGRAPH_CUDA_CHECK(
          cudaMallocFromPoolAsync(&data, bytes, capture->pool->pool, capture->stream),
          "allocating from the graph pool during capture");
      {
        std::lock_guard<std::mutex> lock(capture->allocations->mutex);
        capture->allocations->pointers.push_back(data);
      }
      return std::make_unique<CudaBuffer>(
          device, data, bytes, kind, CudaBuffer::Origin::GraphAllocation, capture->allocations);
    }
    void* data = nullptr;
    if (kind == MemoryKind::Device) {
      ACCGRAPH_CUDA_CHECK(cudaMalloc(&data, bytes),
                          fmt::format("allocating {} bytes of device memory", bytes));
      return std::make_unique<CudaBuffer>(device, data, bytes, kind, CudaBuffer::Origin::Malloc);
    }
    ACCGRAPH_CUDA_CHECK(cudaMallocHost(&data, bytes),
                        fmt::format("allocating {} bytes of pinned host memory", bytes));
    return std::make_unique<CudaBuffer>(device, data, bytes, kind, CudaBuffer::Origin::MallocHost);
  }

  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return std::make_unique<CudaGraph>(pools_, args);
  }

  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    const DeviceEntry& entry = checked(device, "create_markers");
    const std::string strategy = options.resolve_strategy(
        {kStrategyDeviceTimestamps, kStrategyExternalEvents}, kBackendName);
    const size_t depth = options.resolve_ring_depth(kDefaultRingDepth, kMaxRingDepth, kBackendName);
    DeviceGuard guard(device);
    if (strategy == kStrategyExternalEvents)
      return make_external_event_markers(device, depth, entry.resolution_ns);
    return make_device_timestamp_markers(device, depth, entry.resolution_ns, entry.marker_modes,
                                         options);
  }

  void sample_clock(int device, timing::ClockSample* samples, size_t count) override {
    checked(device, "sample_clock");
    sample_globaltimer(device, samples, count);
  }

 private:
  const DeviceEntry& checked(int device, const char* operation) const {
    return devices_[check_device_index(device, devices_.size(), kBackendName, operation)];
  }

  std::vector<DeviceEntry> devices_;
  Pools pools_{kBackendName};
};

[[noreturn]] void unavailable(const std::string& reason) {
  throw Error(ErrorCode::Unavailable, reason, kBackendName);
}

// The number of CUDA devices; Unavailable, saying what to install or update, when there is no
// driver, no device, or a driver older than the runtime.
int usable_device_count() {
  int driver = 0;
  // cudart is linked statically: without libcuda this reports version 0 instead of failing to
  // load the module.
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    (void)cudaGetLastError();
    unavailable(
        "no NVIDIA driver: libcuda.so.1 could not be loaded (install the NVIDIA driver "
        "to use the cuda backend)");
  }
  if (driver < CUDART_VERSION)
    unavailable(
        fmt::format("the NVIDIA driver supports CUDA {} but this backend was built with "
                    "the CUDA {} runtime: update the driver",
                    version_text(driver), version_text(CUDART_VERSION)));
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    (void)cudaGetLastError();
    unavailable(
        fmt::format("no CUDA device: the driver (CUDA {}) found no usable GPU (check "
                    "CUDA_VISIBLE_DEVICES)",
                    version_text(driver)));
  }
  if (err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    unavailable(
        fmt::format("the NVIDIA driver (CUDA {}) is older than the CUDA {} runtime: "
                    "update the driver",
                    version_text(driver), version_text(CUDART_VERSION)));
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    unavailable(fmt::format("the CUDA runtime could not start: {} ({})", cudaGetErrorName(err),
                            cudaGetErrorString(err)));
  }
  return count;
}

// What the backend needs of device `d`; Unavailable when it cannot run this build's kernels.
DeviceEntry inspect_device(int d) {
  cudaDeviceProp prop{};
  ACCGRAPH_CUDA_CHECK(cudaGetDeviceProperties(&prop, d), "reading device properties");
  DeviceEntry entry;
  entry.info.index = d;
  entry.info.name = fmt::format("{} (sm_{}{})", prop.name, prop.major, prop.minor);
  entry.marker_modes.programmatic =
      prop.major >= 9 && marker_switch("ACCGRAPH_CUDA_PROGRAMMATIC_MARKERS", true);
  entry.marker_modes.exact = prop.major >= 9 && placement() != Placement::Chained;
  entry.marker_modes.launch_completion_after = placement() == Placement::LaunchCompletion;
  try {
    DeviceGuard guard(d);
    entry.resolution_ns = measure_globaltimer_resolution_ns();
  } catch (const Error& e) {
    if (e.native_code() == "cudaErrorNoKernelImageForDevice")
      unavailable(
          fmt::format("device {} ({}, compute capability {}.{}) has no kernel image in "
                      "this build: rebuild with ACCGRAPH_CUDA_ARCHITECTURES including "
                      "{}{}",
                      d, prop.name, prop.major, prop.minor, prop.major, prop.minor));
    unavailable(
        fmt::format("device {} ({}) could not run a kernel: {}", d, prop.name, e.message()));
  }
  return entry;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  const int count = usable_device_count();
  std::vector<DeviceEntry> devices;
  for (int d = 0; d < count; ++d) devices.push_back(inspect_device(d));
  resolve_driver_capture_query();
  return std::make_unique<CudaBackend>(std::move(devices));
}

}  // namespace accgraph::detail::cuda

ACCGRAPH_DEFINE_PLUGIN("cuda", accgraph::priority::preferred, ACCGRAPH_VERSION_STRING,
                       ::accgraph::detail::cuda::make_cuda_backend())
