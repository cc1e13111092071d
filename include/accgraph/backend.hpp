// Deprecated path, kept for accgraph 0.2 only: the backend SPI moved to accgraph/spi/backend.hpp
// and ClockSampling to accgraph/spi/clock_sampling.hpp; this forwarding header goes in 0.3.
//
// Note [Forwarding headers]: 0.2 moved the backend authors' kit from include/accgraph/ to
// include/accgraph/spi/, one concept per header, and split report.hpp into report.hpp,
// stats.hpp and exporters.hpp. Every old path keeps working for one minor version: a header at
// the old path includes the new ones, plus whatever the old header brought in (here clock.hpp),
// so that code which relied on that compiles unchanged. They compile silently by default:
// plugins in the wild build with -Werror, and clang turns #pragma message into a warning. Define
// ACCGRAPH_WARN_DEPRECATED_HEADERS to make each one name its replacement (a note on GCC, a
// warning on clang). 0.3 removes them. report.hpp, which held the statistics and exporters too,
// brings in stats.hpp and exporters.hpp only where ACCGRAPH_DEPRECATED_HEAVY_REPORT is defined
// (opt-in, as fmt's FMT_DEPRECATED_HEAVY_CORE), and not at all from 0.3. The package test
// package_old_include_paths builds a plugin and an application that include only the old paths
// (with that define); README.md ("Porting a backend") lists the moves.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/backend.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/backend.hpp (and accgraph/spi/clock_sampling.hpp for ClockSampling)")
#endif

#include "accgraph/clock.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
