// Typed Perfetto debug annotations from accgraph's text metadata (Note [Typed annotations]).
#pragma once

#include <string_view>

#include "perfetto_trace.pb.h"

namespace accgraph::timing::detail {

// Note [Typed annotations]: accgraph metadata values are text (Metadata), but Perfetto shows
// and queries typed arguments (the eager NCCL fields "In msg nelems", "Group size" are numbers,
// "Process Group Ranks" a list). A value that is exactly one literal is written typed:
//   "true", "false"                    -> bool_value
//   -?(0|[1-9][0-9]*) within int64      -> int_value (above int64 but within uint64: uint_value)
//   a JSON number with a fraction or an exponent, finite as a double -> double_value
//   "[a, b, ...]" of such literals (at least one; blanks around items allowed) -> array_values
// Anything else (leading zeros, "+1", "nan", "1.", blanks around a scalar, an empty list, a
// list with any other item) stays string_value, so no text is lost by guessing: a typed value
// prints back as the same literal, except that a double prints in its shortest form ("1.50"
// shows as 1.5).
void set_typed_value(pftrace::DebugAnnotation& annotation, std::string_view value);

}  // namespace accgraph::timing::detail
