// What write_perfetto_trace writes and merge_perfetto_traces reads back about each process: the
// name and category of its "accgraph trace info" event, and the rank prefix of its name.
#pragma once

#include <string>

#include <fmt/format.h>

namespace accgraph::timing::detail {

inline constexpr const char* kInfoEventName = "accgraph trace info";
inline constexpr const char* kInfoCategory = "accgraph";

// "rank <r>: ", which starts the name of every process of rank r's trace (and of a merge).
inline std::string rank_prefix(int rank) { return fmt::format("rank {}: ", rank); }

}  // namespace accgraph::timing::detail
