/* Deprecated path, kept for accgraph 0.2 only: the plugin ABI moved to accgraph/spi/plugin.h;
 * this forwarding header goes in 0.3. See Note [Forwarding headers] in accgraph/backend.hpp. */
#ifndef ACCGRAPH_DEPRECATED_PLUGIN_H
#define ACCGRAPH_DEPRECATED_PLUGIN_H

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/plugin.h is deprecated and goes in accgraph 0.3: include accgraph/spi/plugin.h")
#endif

#include "accgraph/spi/plugin.h"

#endif /* ACCGRAPH_DEPRECATED_PLUGIN_H */
