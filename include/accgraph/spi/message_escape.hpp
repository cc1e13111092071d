// SPI helper for backends: names and paths made safe to put in a one-line message, as the core
// does for every plugin name and path it shows.
#pragma once

#include <string>
#include <string_view>

#include "accgraph/export.hpp"

namespace accgraph::plugin {

/// `text` made safe to put in a one-line message: backslash doubled, newline as \n, other
/// control bytes (C0, DEL, and C1 as UTF-8) and bytes that are not valid UTF-8 as \xNN. Plugin
/// names and paths go through this before they enter a message, so a crafted file name cannot
/// forge lines of `accgraph backends` or of a log.
ACCGRAPH_API std::string escape_for_message(std::string_view text);

}  // namespace accgraph::plugin
