// The library version and the plugin ABI version the core speaks.
#pragma once

#include <cstdint>

#include "accgraph/export.hpp"

#define ACCGRAPH_VERSION_MAJOR 0
#define ACCGRAPH_VERSION_MINOR 2
#define ACCGRAPH_VERSION_PATCH 0

namespace accgraph {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
};

/// The version of the library this program runs against (not the headers it was compiled with).
ACCGRAPH_API Version library_version();

}  // namespace accgraph
