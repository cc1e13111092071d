// SPI helper for backends: the check that turns a device number into an index of the backend's
// devices.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "accgraph/error.hpp"

namespace accgraph {

/// `device` as an index into a backend's `device_count` devices, or Error(InvalidArgument)
/// naming `operation` and the devices that exist. The core checks the device of create_stream,
/// wrap_stream and allocate before a backend sees it; a backend uses this where it turns the
/// number into its own device state (capabilities, create_markers) and in those calls as well.
///
///   const DeviceState& state = devices_[accgraph::check_device_index(device, devices_.size(),
///                                                                    "mybackend",
///                                                                    "create_markers")];
inline size_t check_device_index(int device, size_t device_count, std::string_view backend,
                                 const char* operation) {
  if (device < 0 || static_cast<size_t>(device) >= device_count)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": device " + std::to_string(device) +
                    " does not exist: the " + std::string(backend) + " backend has " +
                    std::to_string(device_count) +
                    " device(s), numbered from 0; pick one of Backend::devices()",
                std::string(backend));
  return static_cast<size_t>(device);
}

}  // namespace accgraph
