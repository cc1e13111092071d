// SPI for backends: the DLPack device of the memory a backend allocates (the optional
// DlpackDevices interface a Backend class may also derive from), which accgraph::dlpack_device()
// and the Python Buffer's __dlpack_device__ report.
#pragma once

#include "accgraph/dlpack.hpp"
#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

class Backend;

/// Note [DLPack devices]: a Buffer is handed to a DLPack consumer (numpy.from_dlpack,
/// torch.from_dlpack) with a DLDevice, which tells the consumer how to read the memory. Only the
/// backend knows what its allocations are, so a Backend class states it by deriving from
/// DlpackDevices as well:
/// - dlpack_device(device, kind) is the DLDevice of the memory allocate(device, bytes, kind)
///   returns, for a valid device. It never throws. The built-in backends: host {kDLCPU, 0};
///   cuda {kDLCUDA, device} and pinned host memory {kDLCUDAHost, 0}; level_zero
///   {kDLOneAPI, device}; vulkan {kDLVulkan, device}, whose data pointer is opaque (an address of
///   accgraph's own, not a VkDeviceMemory, as DLPack allows for some device types); host memory of
///   level_zero and vulkan {kDLCPU, 0}.
/// - Memory whose type the CPU can address (dlpack::host_addressable: kDLCPU, kDLCUDAHost,
///   kDLCUDAManaged) is offered through Python's buffer protocol too.
/// - A backend that does not derive from it (a plugin built before 2.6) keeps what every backend
///   had before it could say: {kDLCPU, 0} for host memory, {kDLExtDev, device} for device memory
///   (unknown to consumers: it may not be addressable by the CPU).
/// Plugin ABI 2.6 (Note [Plugin ABI]): a plugin that derives from it needs a 2.6 core.
class ACCGRAPH_API DlpackDevices {
 public:
  virtual ~DlpackDevices();
  virtual DlpackDevice dlpack_device(int device, MemoryKind kind) const noexcept = 0;
};

/// The DlpackDevices of `backend` (a Registry backend, built-in or a plugin's), or nullptr when it
/// has none. Use it rather than dynamic_cast: the Registry holds a plugin's backend behind a
/// forwarding owner that is not the plugin's class.
ACCGRAPH_API const DlpackDevices* dlpack_devices_of(const Backend& backend) noexcept;

/// What dlpack_device() reports for a backend without DlpackDevices.
constexpr DlpackDevice default_dlpack_device(int device, MemoryKind kind) noexcept {
  return kind == MemoryKind::Host ? DlpackDevice{dlpack::kDLCPU, 0}
                                  : DlpackDevice{dlpack::kDLExtDev, device};
}

}  // namespace accgraph
