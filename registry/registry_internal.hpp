// Registry internals shared by registry.cpp, the plugin loader and the built-in list. The few
// functions marked ACCGRAPH_API are exported for the tests and the fuzzers only.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/spi/backend.hpp"  // the Backend the registry owns
#include "accgraph/spi/plugin.h"

namespace accgraph::detail {

/// The host backend (always available: one device, the CPU; never throws Unavailable). Defined
/// by backends/host/backend.cpp, which is compiled into libaccgraph; declared here, where the
/// built-in list calls it, so that the registry includes no backend's header (a backend sees
/// only the SPI, the registry only its own folder and the public headers).
std::unique_ptr<Backend> make_host_backend();

/// Owns a dlopen handle: closes it when destroyed unless keep_loaded() was called. Every path
/// that rejects a library after opening it (a bad table, a throwing entry point, a duplicate
/// name found by Registry::load_plugin) closes it through this owner. Move-only.
class PluginLibrary {
 public:
  PluginLibrary() = default;
  explicit PluginLibrary(void* handle) : handle_(handle) {}

  void* get() const { return handle_.get(); }
  /// The backend's code and vtables live in the library: once registered it stays loaded until
  /// the process ends (Note [Plugin ABI]).
  void keep_loaded() { (void)handle_.release(); }

 private:
  /// dlclose, a failure logged as a warning.
  struct Close {
    void operator()(void* handle) const noexcept;
  };
  std::unique_ptr<void, Close> handle_;
};

/// A plugin library opened and checked, ready to register.
struct LoadedPlugin {
  PluginLibrary library;     // first, so it is closed last, after the factory that points into it
  std::string path;          // as given, for messages use display_path
  std::string display_path;  // escaped (plugin::escape_for_message)
  std::string name;
  int priority = 0;
  std::string version;  // escaped
  BackendFactory factory;
};

/// Opens `path`, checks the file (Note [Library check]), the entry point and its table (Note
/// [Plugin ABI]). Throws Error(PluginError) naming the file and the reason; the library is
/// closed again then. Any exception from the entry point becomes such a rejection.
LoadedPlugin open_plugin(const std::string& path);

/// The table checks of Note [Plugin ABI] on the table `api` that the library at `path` returned
/// (null included). Throws Error(PluginError) naming the file and the reason, as load_plugin
/// would; returns when the table is accepted. Exported for the tests and fuzz_plugin_table.
ACCGRAPH_API void check_plugin_table(const AccgraphPluginApi* api, const std::string& path);

/// One item found on the plugin path: a library to try, or a path item that could not be read
/// (`problem` set, already phrased as a whole message).
struct PluginCandidate {
  std::string path;
  std::string problem;
};

/// The plugin libraries in the directories (or files) of a ':'-separated path list, sorted per
/// directory, each file once (by real path: a library listed twice, or reached through a link,
/// is loaded once); a directory that cannot be read is a candidate with its problem. Exported
/// for the tests.
ACCGRAPH_API std::vector<PluginCandidate> plugin_candidates(const std::string& path_list);

/// The directory of the backend modules next to libaccgraph (lib/accgraph/).
std::string module_directory();

/// Registers host (linked in) and the vendor modules (cuda, level_zero) by an explicit list:
/// static initialisers are silently dropped from static archives, an explicit list is not.
void register_builtin_backends(Registry& registry);

/// Registers a name that exists but cannot be used, with the reason.
void register_unavailable(Registry& registry, const std::string& name, int priority,
                          const std::string& origin, const std::string& reason);

}  // namespace accgraph::detail
