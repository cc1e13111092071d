// Deprecated path, kept for accgraph 0.2 only: the native-call checks moved to
// accgraph/spi/native_call.hpp; this forwarding header goes in 0.3.
// See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/native_call.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/native_call.hpp")
#endif

#include "accgraph/spi/native_call.hpp"
