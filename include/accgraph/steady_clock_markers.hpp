// Deprecated path, kept for accgraph 0.2 only: SteadyClockMarkers moved to
// accgraph/spi/steady_clock_markers.hpp, steady_clock_ns and sample_steady_clock to
// accgraph/spi/clock_sampling.hpp; this forwarding header goes in 0.3.
// See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/steady_clock_markers.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/steady_clock_markers.hpp (and accgraph/spi/clock_sampling.hpp for sample_steady_clock)")
#endif

#include "accgraph/clock.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/steady_clock_markers.hpp"
