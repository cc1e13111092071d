// The error handling around an export: a failed stream, an exhausted memory or any other
// exception becomes one accgraph::Error. Internal; header-only so that accgraph::perfetto, a
// library of its own, compiles the same code.
#pragma once

#include <exception>
#include <ios>
#include <new>
#include <ostream>

#include <fmt/format.h>

#include "accgraph/error.hpp"

namespace accgraph::timing::detail {

[[noreturn]] inline void throw_write_failed(const char* what, const std::ostream& out) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("writing {} failed: the output stream reported an error ({}{}): the "
                          "destination did not take the data (a full disk, a closed pipe) or "
                          "the stream had failed before the call; check the destination and "
                          "write again",
                          what, out.bad() ? "badbit" : "failbit", out.eof() ? ", eofbit" : ""));
}

// Runs an exporter: flushes `out`, throws Error when the stream failed, and turns any other
// exception into an Error too, so callers see one exception family.
template <class Write>
void export_to(std::ostream& out, const char* what, Write&& write) {
  try {
    write();
    out.flush();
  } catch (const Error&) {
    throw;
  } catch (const std::ios_base::failure&) {  // a stream with exceptions() enabled
    throw_write_failed(what, out);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} ran out of memory: export fewer reports at a time", what));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} failed unexpectedly: {}; this is a bug in accgraph: "
                            "please report it with the names and metadata of the exported "
                            "regions",
                            what, e.what()));
  }
  if (!out) throw_write_failed(what, out);
}

}  // namespace accgraph::timing::detail
