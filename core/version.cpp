// The library's run-time version.
#include "accgraph/version.hpp"

namespace accgraph {

Version library_version() {
  return Version{ACCGRAPH_VERSION_MAJOR, ACCGRAPH_VERSION_MINOR, ACCGRAPH_VERSION_PATCH};
}

}  // namespace accgraph
