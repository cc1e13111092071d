// A well-formed plugin that claims the name of the built-in host backend: must be rejected.
#include "accgraph/registry.hpp"
#include "accgraph/spi/plugin.hpp"

namespace {

std::unique_ptr<accgraph::Backend> make_backend() {
  throw accgraph::Error(accgraph::ErrorCode::Unavailable, "never created");
}

}  // namespace

ACCGRAPH_DEFINE_PLUGIN("host", accgraph::priority::preferred, "0.0-test", make_backend())
