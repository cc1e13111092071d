// SPI helper for backends that dlopen libraries themselves (level_zero's driver paths): the check
// the core runs on a shared library before the dynamic loader sees it.
#pragma once

#include <optional>
#include <string>

#include "accgraph/export.hpp"

namespace accgraph::plugin {

/// Why the dynamic loader must not be given the library at `path`, or nothing when it may.
/// glibc's dlopen maps every PT_LOAD segment and touches it, so a truncated ELF file kills the
/// process with SIGBUS instead of failing; this reads the ELF header and program headers first
/// (Note [Library check] in registry/shared_library.cpp). The reason reads as the end of a
/// sentence about the file and says what to do, e.g. "it is truncated: segment 2 needs bytes up
/// to 16384 but the file has 4000; rebuild or copy it again". Paths in it are escaped
/// (escape_for_message, accgraph/spi/message_escape.hpp).
///
///   if (auto problem = accgraph::plugin::shared_library_problem(path))
///     throw accgraph::Error(accgraph::ErrorCode::Unavailable, "driver '" + path + "': " +
///     *problem);
ACCGRAPH_API std::optional<std::string> shared_library_problem(const std::string& path);

}  // namespace accgraph::plugin
