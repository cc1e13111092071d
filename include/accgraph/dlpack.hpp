// Where a DLPack consumer (numpy.from_dlpack, torch.from_dlpack) finds a Buffer's memory: the
// DLPack device of what a backend allocates, as the backend states it.
#pragma once

#include <cstdint>
#include <string_view>

#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

/// dlpack.h's DLDevice: a device type (DLDeviceType, the constants below) and the device's index
/// among the devices of that type.
struct DlpackDevice {
  int32_t device_type = 0;
  int32_t device_id = 0;

  friend bool operator==(const DlpackDevice& a, const DlpackDevice& b) noexcept {
    return a.device_type == b.device_type && a.device_id == b.device_id;
  }
  friend bool operator!=(const DlpackDevice& a, const DlpackDevice& b) noexcept {
    return !(a == b);
  }
};

/// DLDeviceType values of dlpack.h that accgraph's backends state; a plugin may state any other.
namespace dlpack {
inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;
inline constexpr int32_t kDLCUDAHost = 3;  ///< pinned host memory of CUDA: the CPU can read it
inline constexpr int32_t kDLVulkan = 7;
inline constexpr int32_t kDLExtDev = 12;  ///< unknown to consumers
inline constexpr int32_t kDLCUDAManaged = 13;
inline constexpr int32_t kDLOneAPI = 14;

/// Whether the CPU can address memory of `device_type` (what the buffer protocol needs).
constexpr bool host_addressable(int32_t device_type) noexcept {
  return device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLCUDAManaged;
}
}  // namespace dlpack

/// The DLPack device of memory of `kind` that the backend called `backend` (the default backend
/// when empty) allocates on `device`: what the backend states (Note [DLPack devices] in
/// accgraph/spi/dlpack_device.hpp), else {kDLCPU, 0} for host memory and {kDLExtDev, device}
/// for device memory. Errors: InvalidArgument for an unknown backend, Unavailable for one that
/// cannot run here (as Buffer::allocate).
///
///   accgraph::DlpackDevice d = accgraph::dlpack_device("cuda", 0, accgraph::MemoryKind::Host);
///   // d.device_type == accgraph::dlpack::kDLCUDAHost
ACCGRAPH_API DlpackDevice dlpack_device(std::string_view backend, int device, MemoryKind kind);

}  // namespace accgraph
