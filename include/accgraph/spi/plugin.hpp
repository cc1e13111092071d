// Helpers for writing a backend plugin in C++: ACCGRAPH_DEFINE_PLUGIN generates the C entry
// point (accgraph/spi/plugin.h) and converts exceptions into status + message at the ABI
// boundary.
#pragma once

#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/plugin.h"
#include "accgraph/spi/priority.hpp"  // the PRIORITY argument of ACCGRAPH_DEFINE_PLUGIN

namespace accgraph::plugin {

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
#define ACCGRAPH_DEFINE_PLUGIN(NAME, PRIORITY, VERSION_TEXT, MAKE_BACKEND)                         \
  ACCGRAPH_PLUGIN_ABI_TAG();                                                                       \
  extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {         \
    static const AccgraphPluginApi api = {                                                         \
        sizeof(AccgraphPluginApi),                                                                 \
        ACCGRAPH_PLUGIN_ABI_MAJOR,                                                                 \
        ACCGRAPH_PLUGIN_ABI_MINOR,                                                                 \
        NAME,                                                                                      \
        PRIORITY,                                                                                  \
        VERSION_TEXT,                                                                              \
        [](void** backend, char* message, size_t capacity) noexcept {                              \
          return ::accgraph::plugin::create_backend([] { return MAKE_BACKEND; }, backend, message, \
                                                    capacity);                                     \
        },                                                                                         \
        &::accgraph::plugin::destroy_backend,                                                      \
    };                                                                                             \
    return &api;                                                                                   \
  }
