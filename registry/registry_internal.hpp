// Registry internals shared by registry.cpp, the plugin loader and the built-in list.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accgraph/registry.hpp"

namespace accgraph::detail {

/// A plugin library opened and checked, ready to register.
struct LoadedPlugin {
  std::string path;
  std::string name;
  int priority = 0;
  std::string version;
  BackendFactory factory;
};

/// Opens `path`, checks the entry point and its table (Note [Plugin ABI]). Throws
/// Error(PluginError) naming the file and the reason; the library is closed again then.
LoadedPlugin open_plugin(const std::string& path);

/// The plugin libraries in the directories (or files) of a ':'-separated path list, sorted.
std::vector<std::string> plugin_candidates(const std::string& path_list);

/// The directory of the backend modules next to libaccgraph (lib/accgraph/).
std::string module_directory();

/// Registers host (linked in) and the vendor modules (cuda, level_zero) by an explicit list:
/// static initialisers are silently dropped from static archives, an explicit list is not.
void register_builtin_backends(Registry& registry);

/// Registers a name that exists but cannot be used, with the reason.
void register_unavailable(Registry& registry, const std::string& name, int priority,
                          const std::string& origin, const std::string& reason);

}  // namespace accgraph::detail
