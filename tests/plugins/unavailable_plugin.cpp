// A well-formed plugin whose backend cannot run here: it must be listed as unavailable with its
// reason, never crash the process.
#include "accgraph/registry.hpp"
#include "accgraph/spi/plugin.hpp"

namespace {

std::unique_ptr<accgraph::Backend> make_backend() {
  throw accgraph::Error(accgraph::ErrorCode::Unavailable,
                        "no toy device is attached to this machine");
}

}  // namespace

ACCGRAPH_DEFINE_PLUGIN("test_unavailable", accgraph::priority::normal, "0.0-test", make_backend())
