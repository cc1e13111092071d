// Opening backend plugin libraries and checking their C ABI table before anything is registered.
//
// Note [Plugin ABI]: a plugin exports one extern "C" symbol, accgraph_plugin_entry, returning a
// const AccgraphPluginApi* (include/accgraph/plugin.h). The core accepts the table when
//   - struct_size covers at least the 1.0 fields (tables grow only by appending),
//   - abi_major == ACCGRAPH_PLUGIN_ABI_MAJOR (the C++ SPI objects must match too),
//   - abi_minor >= ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED,
//   - the backend name is [a-z0-9_]+ and both function pointers are set.
// Anything else is rejected with an Error(PluginError) naming the file and the reason, the
// library is closed, and the process keeps working. Accepted libraries are never closed: the
// backend objects and their vtables live in them until the process ends.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <memory>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/plugin.h"
#include "accgraph/version.hpp"
#include "registry_internal.hpp"

namespace accgraph::detail {

namespace {

constexpr size_t kMinimumTableSize =
    offsetof(AccgraphPluginApi, destroy_backend) + sizeof(AccgraphPluginApi::destroy_backend);

[[noreturn]] void reject(const std::string& path, const std::string& reason) {
  throw Error(ErrorCode::PluginError, fmt::format("plugin '{}' was rejected: {}", path, reason));
}

bool valid_backend_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

// Closes a library we decided not to keep.
struct LibraryCloser {
  void operator()(void* handle) const noexcept {
    if (handle != nullptr) dlclose(handle);
  }
};

// The plugin allocated its backend, so the plugin frees it (destroy_backend): the core holds
// this forwarding owner instead of deleting across the library boundary.
class PluginBackend final : public Backend {
 public:
  PluginBackend(Backend* inner, void (*destroy)(void*)) : inner_(inner), destroy_(destroy) {}
  ~PluginBackend() override { destroy_(inner_); }
  std::string name() const override { return inner_->name(); }
  std::vector<DeviceInfo> devices() const override { return inner_->devices(); }
  Capabilities capabilities(int device) const override { return inner_->capabilities(device); }
  std::unique_ptr<StreamImpl> create_stream(int device) override {
    return inner_->create_stream(device);
  }
  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) override {
    return inner_->wrap_stream(device, native_handle);
  }
  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    return inner_->allocate(device, bytes, kind);
  }
  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return inner_->create_graph(args);
  }
  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    return inner_->create_markers(device, options);
  }

 private:
  Backend* inner_;
  void (*destroy_)(void*);
};

// A function rather than an inline comparison: the required minor is 0 today, and comparing an
// unsigned value against a literal 0 draws a warning.
bool minor_is_recent_enough(uint32_t minor, uint32_t required) { return minor >= required; }

AccgraphStatus to_status_checked(int value) { return static_cast<AccgraphStatus>(value); }

ErrorCode to_error_code(AccgraphStatus status) {
  switch (status) {
    case ACCGRAPH_STATUS_INVALID_ARGUMENT: return ErrorCode::InvalidArgument;
    case ACCGRAPH_STATUS_INVALID_STATE: return ErrorCode::InvalidState;
    case ACCGRAPH_STATUS_UNAVAILABLE: return ErrorCode::Unavailable;
    case ACCGRAPH_STATUS_UNSUPPORTED: return ErrorCode::Unsupported;
    case ACCGRAPH_STATUS_PLUGIN_ERROR: return ErrorCode::PluginError;
    default: return ErrorCode::BackendError;
  }
}

}  // namespace

LoadedPlugin open_plugin(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    reject(path, "the file does not exist or cannot be read; check the path");
  if (!S_ISREG(info.st_mode)) reject(path, "it is not a regular file");

  dlerror();
  std::unique_ptr<void, LibraryCloser> library(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!library) {
    const char* why = dlerror();
    reject(path, fmt::format("it could not be loaded as a shared library ({}); build it as a "
                             "shared library (add_library(... MODULE)) for this platform and "
                             "make sure its dependencies can be found",
                             why ? why : "no reason given"));
  }
  dlerror();
  void* symbol = dlsym(library.get(), ACCGRAPH_PLUGIN_ENTRY_SYMBOL);
  if (symbol == nullptr)
    reject(path, fmt::format("it has no entry point '{}'; define one with "
                             "ACCGRAPH_DEFINE_PLUGIN (accgraph/plugin.hpp)",
                             ACCGRAPH_PLUGIN_ENTRY_SYMBOL));
  auto entry = reinterpret_cast<AccgraphPluginEntry>(symbol);
  const AccgraphPluginApi* api = entry();
  if (api == nullptr) reject(path, "its entry point returned no table");
  if (api->struct_size < kMinimumTableSize)
    reject(path, fmt::format("its table is {} bytes, smaller than the {} bytes of ABI 1.0; "
                             "rebuild it against the installed accgraph headers",
                             api->struct_size, kMinimumTableSize));
  if (api->abi_major != ACCGRAPH_PLUGIN_ABI_MAJOR)
    reject(path, fmt::format("it was built for plugin ABI {}.{} but this accgraph ({}.{}.{}) "
                             "speaks ABI {}.{} and the major versions must match; rebuild the "
                             "plugin against this accgraph",
                             api->abi_major, api->abi_minor, ACCGRAPH_VERSION_MAJOR,
                             ACCGRAPH_VERSION_MINOR, ACCGRAPH_VERSION_PATCH,
                             ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR));
  if (!minor_is_recent_enough(api->abi_minor, ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED))
    reject(path, fmt::format("it was built for plugin ABI {}.{} but this accgraph needs at least "
                             "{}.{}; rebuild the plugin against this accgraph",
                             api->abi_major, api->abi_minor, ACCGRAPH_PLUGIN_ABI_MAJOR,
                             ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED));
  if (!valid_backend_name(api->backend_name))
    reject(path, fmt::format("its backend name '{}' is not a valid name ([a-z0-9_]+)",
                             api->backend_name ? api->backend_name : "(null)"));
  if (api->create_backend == nullptr || api->destroy_backend == nullptr)
    reject(path, "its table lacks create_backend or destroy_backend");

  LoadedPlugin plugin;
  plugin.path = path;
  plugin.name = api->backend_name;
  plugin.priority = api->priority;
  plugin.version = api->plugin_version ? api->plugin_version : "";
  std::string name = plugin.name;
  plugin.factory = [api, name]() -> std::unique_ptr<Backend> {
    char message[2048] = {0};
    void* created = nullptr;
    AccgraphStatus status =
        to_status_checked(api->create_backend(&created, message, sizeof(message)));
    if (status != ACCGRAPH_STATUS_OK || created == nullptr) {
      std::string reason = message[0] ? message : "create_backend failed without a message";
      throw Error(status == ACCGRAPH_STATUS_OK ? ErrorCode::BackendError : to_error_code(status),
                  reason, name);
    }
    return std::make_unique<PluginBackend>(static_cast<Backend*>(created), api->destroy_backend);
  };
  library.release();  // kept open for the life of the process (see Note [Plugin ABI])
  return plugin;
}

std::vector<std::string> plugin_candidates(const std::string& path_list) {
  std::vector<std::string> result;
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t end = path_list.find(':', start);
    if (end == std::string::npos) end = path_list.size();
    std::string item = path_list.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    struct stat info {};
    if (::stat(item.c_str(), &info) != 0) {
      result.push_back(item);  // reported as "does not exist" by open_plugin
      continue;
    }
    if (S_ISREG(info.st_mode)) {
      result.push_back(item);
      continue;
    }
    std::vector<std::string> in_directory;
    if (DIR* dir = opendir(item.c_str())) {
      while (dirent* ent = readdir(dir)) {
        std::string file = ent->d_name;
        bool looks_like_library = file.size() > 3 && (file.compare(file.size() - 3, 3, ".so") == 0 ||
                                                      file.find(".so.") != std::string::npos);
        if (looks_like_library) in_directory.push_back(item + "/" + file);
      }
      closedir(dir);
    }
    std::sort(in_directory.begin(), in_directory.end());
    result.insert(result.end(), in_directory.begin(), in_directory.end());
  }
  return result;
}

}  // namespace accgraph::detail
