// Deprecated path, kept for accgraph 0.2 only: PoolTable moved to accgraph/spi/pool_table.hpp;
// this forwarding header goes in 0.3. See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/pool_table.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/pool_table.hpp")
#endif

#include "accgraph/spi/pool_table.hpp"
