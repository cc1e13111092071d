// Helpers for writing a backend plugin in C++: ACCGRAPH_DEFINE_PLUGIN generates the C entry
// point and converts exceptions into status + message at the ABI boundary. Also the checks the
// core runs on a library before the dynamic loader sees it, for backends that load libraries too.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "accgraph/backend.hpp"
#include "accgraph/error.hpp"
#include "accgraph/export.hpp"
#include "accgraph/plugin.h"
#include "accgraph/priority.hpp"

namespace accgraph::plugin {

/// Why the dynamic loader must not be given the library at `path`, or nothing when it may.
/// glibc's dlopen maps every PT_LOAD segment and touches it, so a truncated ELF file kills the
/// process with SIGBUS instead of failing; this reads the ELF header and program headers first
/// (Note [Library check] in registry/shared_library.cpp). The reason reads as the end of a
/// sentence about the file and says what to do, e.g. "it is truncated: segment 2 needs bytes up
/// to 16384 but the file has 4000; rebuild or copy it again". Paths in it are escaped.
///
///   if (auto problem = accgraph::plugin::shared_library_problem(path))
///     throw accgraph::Error(accgraph::ErrorCode::Unavailable, "driver '" + path + "': " + *problem);
ACCGRAPH_API std::optional<std::string> shared_library_problem(const std::string& path);

/// The same checks on the bytes of a whole file held in memory (`size` is the file's size).
ACCGRAPH_API std::optional<std::string> shared_library_image_problem(const void* data,
                                                                      size_t size);

/// `text` made safe to put in a one-line message: backslash doubled, newline as \n, other
/// control bytes (C0, DEL, and C1 as UTF-8) and bytes that are not valid UTF-8 as \xNN. Plugin
/// names and paths go through this before they enter a message, so a crafted file name cannot
/// forge lines of `accgraph backends` or of a log.
ACCGRAPH_API std::string escape_for_message(std::string_view text);

inline AccgraphStatus to_status(ErrorCode code) noexcept {
  return static_cast<AccgraphStatus>(static_cast<int>(code));
}

inline void write_message(char* message, size_t capacity, const char* text) noexcept {
  if (message == nullptr || capacity == 0) return;
  std::snprintf(message, capacity, "%s", text);
}

/// Runs `make()` (returning std::unique_ptr<Backend>) behind the C ABI.
template <class MakeBackend>
AccgraphStatus create_backend(MakeBackend make, void** backend, char* message,
                              size_t capacity) noexcept {
  if (backend == nullptr) {
    write_message(message, capacity, "create_backend called with a null output pointer");
    return ACCGRAPH_STATUS_INVALID_ARGUMENT;
  }
  *backend = nullptr;
  try {
    std::unique_ptr<Backend> created = make();
    *backend = created.release();
    return ACCGRAPH_STATUS_OK;
  } catch (const Error& e) {
    write_message(message, capacity, e.message().c_str());
    return to_status(e.code());
  } catch (const std::exception& e) {
    write_message(message, capacity, e.what());
    return ACCGRAPH_STATUS_BACKEND_ERROR;
  } catch (...) {
    write_message(message, capacity,
                  "creating the backend threw an exception that is not a std::exception; "
                  "throw accgraph::Error (Unavailable when it cannot run here) instead");
    return ACCGRAPH_STATUS_BACKEND_ERROR;
  }
}

inline void destroy_backend(void* backend) noexcept { delete static_cast<Backend*>(backend); }

}  // namespace accgraph::plugin

/// Defines the plugin entry point. MAKE_BACKEND is an expression yielding
/// std::unique_ptr<accgraph::Backend> (it may throw accgraph::Error(Unavailable, ...)).
///
///   ACCGRAPH_DEFINE_PLUGIN("toy", accgraph::priority::normal, "1.0",
///                          std::make_unique<ToyBackend>())
#define ACCGRAPH_DEFINE_PLUGIN(NAME, PRIORITY, VERSION_TEXT, MAKE_BACKEND)                      \
  ACCGRAPH_PLUGIN_ABI_TAG();                                                                    \
  extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {      \
    static const AccgraphPluginApi api = {                                                      \
        sizeof(AccgraphPluginApi),                                                              \
        ACCGRAPH_PLUGIN_ABI_MAJOR,                                                              \
        ACCGRAPH_PLUGIN_ABI_MINOR,                                                              \
        NAME,                                                                                   \
        PRIORITY,                                                                               \
        VERSION_TEXT,                                                                           \
        [](void** backend, char* message, size_t capacity) noexcept {                          \
          return ::accgraph::plugin::create_backend([] { return MAKE_BACKEND; }, backend,       \
                                                    message, capacity);                         \
        },                                                                                      \
        &::accgraph::plugin::destroy_backend,                                                   \
    };                                                                                          \
    return &api;                                                                                \
  }
