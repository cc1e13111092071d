// Deprecated path, kept for accgraph 0.2 only: ACCGRAPH_DEFINE_PLUGIN moved to
// accgraph/spi/plugin.hpp, shared_library_problem to accgraph/spi/library_check.hpp and
// escape_for_message to accgraph/spi/message_escape.hpp; this forwarding header goes in 0.3.
// See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/plugin.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/plugin.hpp (and accgraph/spi/library_check.hpp, accgraph/spi/message_escape.hpp for the library check and message escaping)")
#endif

#include <cstddef>
#include <optional>
#include <string>

#include "accgraph/clock.hpp"
#include "accgraph/export.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/library_check.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.hpp"

namespace accgraph::plugin {

/// The checks of shared_library_problem on the bytes of a whole file held in memory. No longer
/// installed from 0.3 on (it is the loader's, declared in registry/shared_library.hpp).
ACCGRAPH_API std::optional<std::string> shared_library_image_problem(const void* data, size_t size);

}  // namespace accgraph::plugin
