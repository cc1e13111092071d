// The async plugin's entry point: the one symbol accgraph's loader resolves
// (accgraph/spi/plugin.h).
#include <accgraph/spi/plugin.hpp>  // ACCGRAPH_DEFINE_PLUGIN and accgraph::priority

#include "async.hpp"

// Priority fallback + 1: above the host backend, below every vendor backend and most plugins,
// so loading this example never makes it the default where something better is available.
ACCGRAPH_DEFINE_PLUGIN("async", accgraph::priority::fallback + 1, "1.0",
                       async_backend::make_backend())
