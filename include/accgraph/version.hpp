// The library version and the plugin ABI version the core speaks.
#pragma once

#include <cstdint>

#include "accgraph/export.hpp"

#define ACCGRAPH_VERSION_MAJOR 0
#define ACCGRAPH_VERSION_MINOR 2
#define ACCGRAPH_VERSION_PATCH 0
// The one version source: CMakeLists.txt reads the three lines above (keep each on one line).

#define ACCGRAPH_DETAIL_STRINGIFY(x) #x
#define ACCGRAPH_DETAIL_TEXT(x) ACCGRAPH_DETAIL_STRINGIFY(x)
/// "0.2.0": the headers' version as text (the built-in modules' plugin version, for one).
#define ACCGRAPH_VERSION_STRING                                              \
  ACCGRAPH_DETAIL_TEXT(ACCGRAPH_VERSION_MAJOR)                               \
  "." ACCGRAPH_DETAIL_TEXT(ACCGRAPH_VERSION_MINOR) "." ACCGRAPH_DETAIL_TEXT( \
      ACCGRAPH_VERSION_PATCH)

namespace accgraph {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
};

/// The version of the library this program runs against (not the headers it was compiled with).
ACCGRAPH_API Version library_version();

}  // namespace accgraph
