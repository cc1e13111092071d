// The toy backend object: one device, honest capabilities, and the factories of its streams,
// buffers, graphs and markers. Start reading here.
#include "toy.hpp"

namespace toy {

void fail(accgraph::ErrorCode code, const std::string& message) {
  throw accgraph::Error(code, message, kBackendName);
}

namespace {

using accgraph::Capabilities;
using accgraph::CaptureMode;
using accgraph::ErrorCode;

class ToyBackend final : public accgraph::Backend {
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
    caps.timed_delay = true;            // sleep, then busy-wait to the deadline (stream.cpp)
    caps.graph_update = false;
    caps.pool_sharing = true;
    caps.marker_strategies = {kMarkerStrategy};
    caps.marker_ring_depth = kDefaultRingDepth;
    caps.timer_resolution_ns = 1;       // steady_clock counts nanoseconds (markers.cpp)
    return caps;
  }

  std::unique_ptr<accgraph::StreamImpl> create_stream(int device) override {
    check_device(device, "create_stream");
    auto queue = std::make_shared<ToyQueue>();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = queues_.begin(); it != queues_.end();)  // forget queues that are gone
      it = it->second.expired() ? queues_.erase(it) : std::next(it);
    queues_[queue.get()] = queue;
    return std::make_unique<ToyStream>(std::move(queue));
  }

  // The handle must be the native_handle() of a live toy stream: anything else would be a
  // wild pointer, so it is looked up rather than trusted.
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int device, void* native_handle) override {
    check_device(device, "wrap_stream");
    std::shared_ptr<ToyQueue> queue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = queues_.find(native_handle);
      if (it != queues_.end()) queue = it->second.lock();
    }
    if (!queue)
      fail(ErrorCode::InvalidArgument,
           "wrap_stream: the handle is not a live toy queue: pass the native_handle() of a toy "
           "stream that still exists");
    return std::make_unique<ToyStream>(std::move(queue));
  }

  std::unique_ptr<accgraph::BufferImpl> allocate(int device, size_t bytes,
                                                 accgraph::MemoryKind kind) override {
    check_device(device, "allocate");
    if (bytes == 0) fail(ErrorCode::InvalidArgument, "allocate: 0 bytes: ask for at least one byte");
    return std::make_unique<ToyBuffer>(bytes, kind);
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

 private:
  static void check_device(int device, const char* operation) {
    if (device != 0)
      fail(ErrorCode::InvalidArgument, std::string(operation) + ": device " +
                                           std::to_string(device) +
                                           " does not exist: the toy backend has one device, 0");
  }

  std::mutex mutex_;  // guards queues_ (Backend methods are called from any thread)
  std::map<void*, std::weak_ptr<ToyQueue>> queues_;
  PoolRegistry pools_{kBackendName, kPoolTag};
};

}  // namespace

std::unique_ptr<accgraph::Backend> make_backend() { return std::make_unique<ToyBackend>(); }

}  // namespace toy
