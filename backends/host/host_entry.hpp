// The host backend's one entry point: the registry's explicit built-in list calls it.
#pragma once

#include <memory>

#include "accgraph/spi/backend.hpp"

namespace accgraph::detail {

/// The host backend (always available: one device, the CPU). Never throws Unavailable.
std::unique_ptr<Backend> make_host_backend();

}  // namespace accgraph::detail
