// Deprecated path, kept for accgraph 0.2 only: the backend priorities moved to
// accgraph/spi/priority.hpp; this forwarding header goes in 0.3.
// See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/priority.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/priority.hpp")
#endif

#include "accgraph/spi/priority.hpp"
