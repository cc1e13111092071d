// A well-formed plugin whose factory returns no backend (an empty std::unique_ptr) and no error
// (audit P08): listed unavailable, saying it returned no backend, not that it "failed".
#include "accgraph/registry.hpp"
#include "accgraph/spi/plugin.hpp"

ACCGRAPH_DEFINE_PLUGIN("test_null_factory", accgraph::priority::normal, "0.0-test",
                       std::unique_ptr<accgraph::Backend>{})
