// SPI helper for backends: the file handling of GraphImplInterface::debug_dump (open, write,
// errors).
#pragma once

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "accgraph/error.hpp"

namespace accgraph {

/// GraphImplInterface::debug_dump's file handling: opens `path`, lets `write` fill it, and turns
/// a file that cannot be opened or written into Error(BackendError) naming the path, the
/// system's reason and what to check.
template <class Write>
void write_debug_dump(const std::string& path, std::string_view backend, Write&& write) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::BackendError,
                "debug_dump: " + what + ": " + std::strerror(errno) +
                    "; check that the directory exists and is writable, and that the disk is "
                    "not full",
                std::string(backend), "std::ofstream");
  };
  std::ofstream out(path);
  if (!out) fail("cannot open '" + path + "' for writing");
  write(out);
  out.flush();
  if (!out) fail("writing '" + path + "' failed");
}

}  // namespace accgraph
