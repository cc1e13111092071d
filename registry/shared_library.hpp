// The plugin loader's library check on a file held in memory (not installed): what
// shared_library_problem (accgraph/spi/library_check.hpp) runs on a file's bytes, declared here
// for the loader's tests and the fuzzer, which feed it images without writing files.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "accgraph/export.hpp"
#include "accgraph/spi/library_check.hpp"

namespace accgraph::plugin {

/// The checks of shared_library_problem on the bytes of a whole file held in memory (`size` is
/// the file's size). Exported only so that the tests and the fuzzer reach it.
ACCGRAPH_API std::optional<std::string> shared_library_image_problem(const void* data, size_t size);

}  // namespace accgraph::plugin
