// The explicit list of built-in backends: host (linked into the core) and the vendor modules
// (one per accgraph_backend() call of the top-level CMakeLists.txt) loaded from lib/accgraph/
// next to libaccgraph at run time.
#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/priority.hpp"
#include "registry_internal.hpp"

namespace accgraph::detail {

namespace {

struct BuiltinModule {
  const char* name;
  // Only for listing a module that is absent or cannot be loaded (`accgraph backends` sorts by
  // priority): a loaded module registers with the priority of its own entry table.
  int priority_if_absent;
  const char* how_to_build;  // shown when the module is absent from this installation
};

// One row per vendor backend, written by its accgraph_backend() call
// (cmake/AccgraphBackends.cmake) whether or not this build has it: the priority is the one its
// module's entry table declares (ACCGRAPH_DEFINE_PLUGIN in backends/<name>/backend.cpp), read
// from there at configure time.
constexpr BuiltinModule kBuiltinModules[] = {
#include "accgraph_builtin_modules.inc"
};

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

std::string module_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&module_directory), &info) == 0 || info.dli_fname == nullptr)
    return {};
  // Canonical, so messages show lib/accgraph rather than bin/../lib/accgraph.
  char resolved[PATH_MAX];
  std::string library = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  size_t slash = library.rfind('/');
  std::string directory = slash == std::string::npos ? "." : library.substr(0, slash);
  return directory + "/" + ACCGRAPH_MODULE_SUBDIR;
}

void register_builtin_backends(Registry& registry) {
  registry.register_backend(
      "host", priority::fallback, [] { return make_host_backend(); }, "built-in");
  const std::string directory = module_directory();
  for (const BuiltinModule& module : kBuiltinModules) {
    std::string path = fmt::format("{}/libaccgraph_backend_{}.so", directory, module.name);
    std::string shown_path = plugin::escape_for_message(path);
    std::string origin = fmt::format("built-in module {}", shown_path);
    if (!file_exists(path)) {
      register_unavailable(registry, module.name, module.priority_if_absent,
                           fmt::format("built-in module (not installed)"),
                           fmt::format("this installation has no {} module ({} is missing); {}",
                                       module.name, shown_path, module.how_to_build));
      continue;
    }
    try {
      LoadedPlugin plugin = open_plugin(path);
      if (plugin.name != module.name)
        throw Error(ErrorCode::PluginError,
                    fmt::format("module '{}' registers backend '{}' instead of '{}'", shown_path,
                                plugin.name, module.name));
      registry.register_backend(plugin.name, plugin.priority, std::move(plugin.factory), origin);
      plugin.library.keep_loaded();
    } catch (const Error& e) {
      register_unavailable(registry, module.name, module.priority_if_absent, origin,
                           fmt::format("its module could not be loaded: {}", e.message()));
    }
  }
}

}  // namespace accgraph::detail
