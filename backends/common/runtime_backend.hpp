// Internal to the in-tree module backends (level_zero, vulkan): the Backend members that only
// forward to a shared Runtime's devices and to the backend's factories (Note [Runtime backends]),
// and the error its start-up throws when it finds nothing to run on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/types.hpp"

namespace accgraph::detail {

/// Error(Unavailable) from `backend`'s start-up: no driver or device it can use (`message` says
/// which, and what to install or set), with the native `call` and result `code` where one failed.
[[noreturn]] inline void throw_unavailable(const char* backend, std::string message,
                                           std::string call = {}, std::string code = {}) {
  throw Error(ErrorCode::Unavailable, std::move(message), backend, std::move(call),
              std::move(code));
}

/// The marker ring depths a backend builds by default and at the most.
struct RingDepths {
  size_t default_depth;
  size_t max_depth;
};

/// Note [Runtime backends]: level_zero and vulkan keep what they discover at start-up in one
/// shared `Runtime` (its `devices`: a unique_ptr<DeviceState> per device, numbered from 0, each
/// with its `index`, `name` and `timer`, whose resolution_ns() capabilities() reports) and
/// build their objects with three free functions of their own namespace, found here by
/// argument-dependent lookup on the Runtime:
///
///   allocate_buffer(const std::shared_ptr<Runtime>&, DeviceState&, size_t bytes, MemoryKind)
///   make_graph(std::shared_ptr<Runtime>, const GraphArgs&)
///   make_markers(std::shared_ptr<Runtime>, DeviceState&, size_t ring_depth)
///
/// The forwarding (device list, device lookup with the SPI's index check, buffer, graph and marker
/// factories with the strategy and ring-depth checks, the capabilities every such backend reports
/// alike: its marker strategies, the default ring depth and the timer's resolution) is written
/// once, here, with wrap_stream's device and null-handle checks (wrap_target) and the error a
/// start-up that finds nothing to run on throws (throw_unavailable); a backend's class keeps what
/// differs: its streams, the rest of a device's capabilities (device_capabilities) and the marker
/// strategies a device offers (marker_strategies, which both create_markers and capabilities use,
/// so they agree).
template <class Runtime>
class RuntimeBackend : public Backend, public DlpackDevices {
 public:
  using DeviceState = std::decay_t<decltype(*std::declval<Runtime&>().devices.front())>;

  std::string name() const override { return name_; }

  Capabilities capabilities(int device) const override {
    const DeviceState& state = device_state(device, "capabilities");
    Capabilities caps = device_capabilities(state);
    caps.marker_strategies = marker_strategies(state);
    caps.marker_ring_depth = depths_.default_depth;
    caps.timer_resolution_ns = state.timer.resolution_ns();
    return caps;
  }

  std::vector<DeviceInfo> devices() const override {
    std::vector<DeviceInfo> out;
    for (const auto& device : runtime_->devices) out.push_back({device->index, device->name});
    return out;
  }

  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    return allocate_buffer(runtime_, device_state(device, "allocate"), bytes, kind);
  }

  // Note [DLPack devices] (spi/dlpack_device.hpp): host memory is plain CPU memory.
  DlpackDevice dlpack_device(int device, MemoryKind kind) const noexcept override {
    return kind == MemoryKind::Host ? DlpackDevice{dlpack::kDLCPU, 0}
                                    : DlpackDevice{dlpack_device_type_, device};
  }

  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return make_graph(runtime_, args);
  }

  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    DeviceState& state = device_state(device, "create_markers");
    options.resolve_strategy(marker_strategies(state), name_);
    return make_markers(
        runtime_, state,
        options.resolve_ring_depth(depths_.default_depth, depths_.max_depth, name_));
  }

 protected:
  /// `dlpack_device_type`: the DLDeviceType of the backend's device memory (dlpack::kDLOneAPI...).
  RuntimeBackend(std::string name, std::shared_ptr<Runtime> runtime, RingDepths depths,
                 int32_t dlpack_device_type)
      : name_(std::move(name)),
        runtime_(std::move(runtime)),
        depths_(depths),
        dlpack_device_type_(dlpack_device_type) {}

  /// What `state` can do, but for the marker fields and timer_resolution_ns, which
  /// capabilities() fills in.
  virtual Capabilities device_capabilities(const DeviceState& state) const = 0;

  /// The marker strategies `state` offers, the default first (empty: no markers).
  virtual std::vector<std::string> marker_strategies(const DeviceState& state) const = 0;

  /// Device `device`, or Error(InvalidArgument) naming `operation` (check_device_index).
  DeviceState& device_state(int device, const char* operation) const {
    return *runtime_
                ->devices[check_device_index(device, runtime_->devices.size(), name_, operation)];
  }

  /// wrap_stream's checks: device `device` (as device_state), or Error(InvalidArgument) for a
  /// null `native_handle`, saying to pass `expected` ("a VkQueue of ...").
  DeviceState& wrap_target(int device, void* native_handle, const char* expected) const {
    DeviceState& state = device_state(device, "wrap_stream");
    if (native_handle == nullptr)
      throw Error(ErrorCode::InvalidArgument,
                  std::string("wrap_stream: the native handle is null: pass ") + expected, name_);
    return state;
  }

  const std::shared_ptr<Runtime>& runtime() const noexcept { return runtime_; }

 private:
  std::string name_;
  std::shared_ptr<Runtime> runtime_;
  RingDepths depths_;
  int32_t dlpack_device_type_;
};

}  // namespace accgraph::detail
