// Opening backend plugin libraries and checking their C ABI table before anything is registered.
//
// Note [Plugin ABI]: a plugin exports one extern "C" symbol, accgraph_plugin_entry, returning a
// const AccgraphPluginApi* (include/accgraph/spi/plugin.h). The core accepts the table when
//   - struct_size covers at least the 1.0 fields (tables grow only by appending),
//   - abi_major == ACCGRAPH_PLUGIN_ABI_MAJOR (the C++ SPI objects must match too),
//   - ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED <= abi_minor <= ACCGRAPH_PLUGIN_ABI_MINOR (a newer minor
//     may read what this core does not pass, e.g. 2.3's MarkerOptions::memory_budget),
//   - the backend name is [a-z0-9_]+ and both function pointers are set
// (check_plugin_table). Before that the file itself is checked (Note [Library check] in
// shared_library.cpp), and the entry point must not throw. Anything else is rejected with an
// Error(PluginError) naming the file (escaped) and the reason, the library is closed (including
// a duplicate name found later by Registry::load_plugin: PluginLibrary owns the handle until the
// backend is registered), and the process keeps working. Accepted libraries are never closed:
// the backend objects and their vtables live in them until the process ends.
#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <typeinfo>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/spi/library_check.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.h"
#include "accgraph/version.hpp"
#include "registry_internal.hpp"

namespace accgraph::detail {

namespace {

constexpr size_t kMinimumTableSize =
    offsetof(AccgraphPluginApi, destroy_backend) + sizeof(AccgraphPluginApi::destroy_backend);
// The message buffer handed to create_backend.
constexpr size_t kMessageCapacity = 2048;
// Longer invalid names are cut in messages (a name is checked whole).
constexpr size_t kShownNameBytes = 200;

using plugin::escape_for_message;

[[noreturn]] void reject(const std::string& path, const std::string& reason) {
  throw Error(ErrorCode::PluginError,
              fmt::format("plugin '{}' was rejected: {}", escape_for_message(path), reason));
}

bool valid_backend_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

std::string shown_name(const char* name) {
  if (name == nullptr) return "(null)";
  std::string_view text(name);
  if (text.size() <= kShownNameBytes) return escape_for_message(text);
  return fmt::format("{}... ({} bytes)", escape_for_message(text.substr(0, kShownNameBytes)),
                     text.size());
}

// The type of the exception being handled, demangled ("std::runtime_error", "int"). Call it only
// inside a catch block, while the library that threw is still loaded: the type information lives
// in it.
std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), &std::free);
  return escape_for_message(status == 0 && demangled ? demangled.get() : type->name());
}

// Runs `call` and describes what it threw ("an exception of type T (what)"), empty when it
// returned. The exception object is destroyed before this returns, while the plugin that threw it
// (its destructor, its type information) is still loaded; only then may a rejection close the
// library (closing it during the unwinding crashed in the personality routine).
template <class Call>
std::string what_it_threw(Call call) {
  try {
    call();
    return {};
  } catch (const std::exception& e) {
    return fmt::format("an exception of type {} ({})", current_exception_type(),
                       escape_for_message(e.what()));
  } catch (...) {
    return fmt::format("an exception of type {}", current_exception_type());
  }
}

// The plugin ABI written into the file by ACCGRAPH_PLUGIN_ABI_TAG (plugin.h), read without
// loading it: {major, minor}, or nullopt when the file has no tag (a plugin that predates it or
// writes its own table without it) or cannot be read.
std::optional<std::pair<unsigned long, unsigned long>> abi_tag_of_file(const std::string& path) {
  constexpr std::streamsize kMaxScanned = 256 << 20;  // plugins are far smaller
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamsize size = std::min<std::streamsize>(in.tellg(), kMaxScanned);
  if (size <= 0) return std::nullopt;
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  bytes.resize(static_cast<size_t>(in.gcount()));
  const std::string_view prefix = ACCGRAPH_PLUGIN_ABI_TAG_PREFIX;
  const size_t at = std::string_view(bytes).find(prefix);
  if (at == std::string::npos) return std::nullopt;
  // "2u.1u" (the macros' spelling, suffix included) or "2.1".
  const char* p = bytes.c_str() + at + prefix.size();
  char* end = nullptr;
  const unsigned long major = std::strtoul(p, &end, 10);
  if (end == p) return std::nullopt;
  if (*end == 'u') ++end;
  if (*end != '.') return std::nullopt;
  p = end + 1;
  const unsigned long minor = std::strtoul(p, &end, 10);
  if (end == p) return std::nullopt;
  return std::make_pair(major, minor);
}

// The first symbol a dlopen failure names ("undefined symbol: _ZTI..."), demangled; empty when
// the message names none.
std::string undefined_symbol_in(const std::string& why) {
  const std::string marker = "undefined symbol: ";
  const size_t at = why.find(marker);
  if (at == std::string::npos) return {};
  std::string symbol = why.substr(at + marker.size());
  symbol = symbol.substr(0, symbol.find_first_of(" \t\n,;)"));
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? demangled.get() : symbol;
}

// Why dlopen refused `path`: for a plugin built for a newer accgraph (its ABI tag says a newer
// minor, or it needs an accgraph symbol this core lacks), say so with both ABI versions;
// otherwise the loader's own reason and how to build a loadable library.
std::string dlopen_failure(const std::string& path, const std::string& why) {
  const std::string symbol = undefined_symbol_in(why);
  const std::string needs =
      symbol.empty() ? std::string()
                     : fmt::format(" (it needs '{}', which this accgraph does not define)",
                                   escape_for_message(symbol));
  const auto tag = abi_tag_of_file(path);
  if (tag && (tag->first != ACCGRAPH_PLUGIN_ABI_MAJOR || tag->second > ACCGRAPH_PLUGIN_ABI_MINOR))
    return fmt::format(
        "it was built for plugin ABI {}.{} but this accgraph ({}.{}.{}) speaks "
        "ABI {}.{}{}: it needs a {} accgraph; install one whose plugin ABI is "
        "{}.{} or later, or rebuild the plugin against this accgraph",
        tag->first, tag->second, ACCGRAPH_VERSION_MAJOR, ACCGRAPH_VERSION_MINOR,
        ACCGRAPH_VERSION_PATCH, ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR, needs,
        tag->first != ACCGRAPH_PLUGIN_ABI_MAJOR ? "different" : "newer", tag->first, tag->second);
  if (symbol.rfind("accgraph::", 0) == 0 || symbol.find(" accgraph::") != std::string::npos)
    return fmt::format(
        "it could not be loaded: it needs '{}', which this accgraph ({}.{}.{}, "
        "plugin ABI {}.{}) does not define, so it was probably built against "
        "another accgraph version; rebuild it against this accgraph's headers",
        escape_for_message(symbol), ACCGRAPH_VERSION_MAJOR, ACCGRAPH_VERSION_MINOR,
        ACCGRAPH_VERSION_PATCH, ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR);
  return fmt::format(
      "it could not be loaded as a shared library ({}); build it as a shared "
      "library (add_library(... MODULE)) for this platform and make sure its "
      "dependencies can be found",
      escape_for_message(why));
}

// The plugin allocated its backend, so the plugin frees it (destroy_backend): the core holds
// this forwarding owner instead of deleting across the library boundary.
class PluginBackend final : public Backend {
 public:
  PluginBackend(Backend* inner, void (*destroy)(void*))
      : inner_(inner),
        clock_(dynamic_cast<ClockSampling*>(inner)),
        dlpack_(dynamic_cast<DlpackDevices*>(inner)),
        destroy_(destroy) {}
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
  /// The plugin backend's optional interfaces (found on the plugin's own object).
  ClockSampling* clock_sampling() const noexcept { return clock_; }
  const DlpackDevices* dlpack_devices() const noexcept { return dlpack_; }

 private:
  Backend* inner_;
  ClockSampling* clock_;
  const DlpackDevices* dlpack_;
  void (*destroy_)(void*);
};

}  // namespace
}  // namespace accgraph::detail

namespace accgraph {

ClockSampling* clock_sampling(Backend& backend) noexcept {
  if (auto* plugin = dynamic_cast<detail::PluginBackend*>(&backend))
    return plugin->clock_sampling();
  return dynamic_cast<ClockSampling*>(&backend);
}

const DlpackDevices* dlpack_devices_of(const Backend& backend) noexcept {
  if (auto* plugin = dynamic_cast<const detail::PluginBackend*>(&backend))
    return plugin->dlpack_devices();
  return dynamic_cast<const DlpackDevices*>(&backend);
}

}  // namespace accgraph

namespace accgraph::detail {
namespace {

// A function rather than an inline comparison: the required minor is 0 today, and comparing an
// unsigned value against a literal 0 draws a warning.
bool minor_is_recent_enough(uint32_t minor, uint32_t required) { return minor >= required; }

ErrorCode to_error_code(AccgraphStatus status) {
  switch (status) {
    case ACCGRAPH_STATUS_INVALID_ARGUMENT:
      return ErrorCode::InvalidArgument;
    case ACCGRAPH_STATUS_INVALID_STATE:
      return ErrorCode::InvalidState;
    case ACCGRAPH_STATUS_UNAVAILABLE:
      return ErrorCode::Unavailable;
    case ACCGRAPH_STATUS_UNSUPPORTED:
      return ErrorCode::Unsupported;
    case ACCGRAPH_STATUS_PLUGIN_ERROR:
      return ErrorCode::PluginError;
    default:
      return ErrorCode::BackendError;
  }
}

// Calls the plugin's create_backend behind the C ABI. Whatever it does wrong (throws, leaves
// the message without a NUL, returns OK without a backend) becomes an Error naming the backend.
std::unique_ptr<Backend> create_plugin_backend(const AccgraphPluginApi* api,
                                               const std::string& name) {
  char message[kMessageCapacity] = {0};
  void* created = nullptr;
  AccgraphStatus status = ACCGRAPH_STATUS_OK;
  std::string thrown =
      what_it_threw([&] { status = api->create_backend(&created, message, sizeof(message)); });
  if (!thrown.empty())
    throw Error(ErrorCode::BackendError,
                fmt::format("its create_backend threw {} through the C ABI; a plugin must return "
                            "a status and a message instead (ACCGRAPH_DEFINE_PLUGIN does)",
                            thrown),
                name);
  if (status != ACCGRAPH_STATUS_OK || created == nullptr) {
    // Bounded: a plugin may fill the whole buffer without the NUL it owes.
    std::string reason(message, strnlen(message, sizeof(message)));
    if (reason.empty() && status == ACCGRAPH_STATUS_OK)  // a factory that made none
      reason =
          "its create_backend returned OK but no backend (a null pointer: "
          "ACCGRAPH_DEFINE_PLUGIN's factory returned an empty std::unique_ptr); the plugin must "
          "return a backend, or fail with a status and a message saying why it has none";
    if (reason.empty()) reason = "create_backend failed without a message";
    throw Error(status == ACCGRAPH_STATUS_OK ? ErrorCode::BackendError : to_error_code(status),
                std::move(reason), name);
  }
  return std::make_unique<PluginBackend>(static_cast<Backend*>(created), api->destroy_backend);
}

}  // namespace

void PluginLibrary::Close::operator()(void* handle) const noexcept {
  if (dlclose(handle) != 0) {
    const char* why = dlerror();
    log(LogLevel::Warning, fmt::format("closing a rejected plugin library failed: {}",
                                       escape_for_message(why ? why : "no reason given")));
  }
}

void check_plugin_table(const AccgraphPluginApi* api, const std::string& path) {
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
    reject(path, fmt::format("it was built for plugin ABI {}.{} but this accgraph needs at "
                             "least {}.{}; rebuild the plugin against this accgraph",
                             api->abi_major, api->abi_minor, ACCGRAPH_PLUGIN_ABI_MAJOR,
                             ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED));
  if (api->abi_minor > ACCGRAPH_PLUGIN_ABI_MINOR)
    reject(path,
           fmt::format("it was built for plugin ABI {}.{} but this accgraph ({}.{}.{}) "
                       "speaks ABI {}.{}: it needs a newer accgraph; install one whose "
                       "plugin ABI is {}.{} or later, or rebuild the plugin against this one",
                       api->abi_major, api->abi_minor, ACCGRAPH_VERSION_MAJOR,
                       ACCGRAPH_VERSION_MINOR, ACCGRAPH_VERSION_PATCH, ACCGRAPH_PLUGIN_ABI_MAJOR,
                       ACCGRAPH_PLUGIN_ABI_MINOR, api->abi_major, api->abi_minor));
  if (!valid_backend_name(api->backend_name))
    reject(path, fmt::format("its backend name '{}' is not a valid name ([a-z0-9_]+); rename "
                             "the backend",
                             shown_name(api->backend_name)));
  if (api->create_backend == nullptr || api->destroy_backend == nullptr)
    reject(path,
           "its table lacks create_backend or destroy_backend; define both (or use "
           "ACCGRAPH_DEFINE_PLUGIN)");
}

LoadedPlugin open_plugin(const std::string& path) {
  LoadedPlugin plugin;
  plugin.path = path;
  plugin.display_path = escape_for_message(path);
  if (std::optional<std::string> problem = plugin::shared_library_problem(path))
    reject(path, *problem);

  dlerror();
  plugin.library = PluginLibrary(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (plugin.library.get() == nullptr) {
    const char* why = dlerror();
    reject(path, dlopen_failure(path, why ? why : "no reason given"));
  }
  dlerror();
  void* symbol = dlsym(plugin.library.get(), ACCGRAPH_PLUGIN_ENTRY_SYMBOL);
  if (symbol == nullptr)
    reject(path, fmt::format("it has no entry point '{}'; define one with "
                             "ACCGRAPH_DEFINE_PLUGIN (accgraph/spi/plugin.hpp)",
                             ACCGRAPH_PLUGIN_ENTRY_SYMBOL));
  auto entry = reinterpret_cast<AccgraphPluginEntry>(symbol);
  const AccgraphPluginApi* api = nullptr;
  std::string thrown = what_it_threw([&] { api = entry(); });
  if (!thrown.empty())
    reject(path, fmt::format("its entry point threw {}; the entry point must return its table "
                             "(or NULL) and never throw",
                             thrown));
  check_plugin_table(api, path);

  plugin.name = api->backend_name;
  plugin.priority = api->priority;
  plugin.version = api->plugin_version ? escape_for_message(api->plugin_version) : "";
  std::string name = plugin.name;
  plugin.factory = [api, name] { return create_plugin_backend(api, name); };
  return plugin;
}

namespace {

// One library reached twice (a directory and a file in it, the same item twice, a symbolic
// link) is one candidate, the first: loading it again would only be rejected as a duplicate
// backend. Files are compared by their real paths; one whose real path cannot be resolved is
// kept, and open_plugin reports why it cannot be opened.
std::vector<PluginCandidate> without_repeated_files(std::vector<PluginCandidate> candidates) {
  std::vector<PluginCandidate> result;
  std::set<std::string> seen;
  for (PluginCandidate& candidate : candidates) {
    if (candidate.problem.empty()) {
      std::unique_ptr<char, void (*)(void*)> real(realpath(candidate.path.c_str(), nullptr),
                                                  &std::free);
      if (real && !seen.insert(real.get()).second) continue;
    }
    result.push_back(std::move(candidate));
  }
  return result;
}

}  // namespace

std::vector<PluginCandidate> plugin_candidates(const std::string& path_list) {
  std::vector<PluginCandidate> result;
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t end = path_list.find(':', start);
    if (end == std::string::npos) end = path_list.size();
    std::string item = path_list.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    struct stat info {};
    if (::stat(item.c_str(), &info) != 0 || S_ISREG(info.st_mode)) {
      result.push_back({item, {}});  // open_plugin reports why it cannot be opened
      continue;
    }
    auto unreadable = [&](const char* call, int error) {
      result.push_back(
          {item, fmt::format("'{}' on the plugin path is not a plugin library and cannot be "
                             "read as a directory ({}: {}); fix its permissions or remove it "
                             "from ACCGRAPH_PLUGIN_PATH",
                             escape_for_message(item), call, std::strerror(error))});
    };
    DIR* dir = opendir(item.c_str());
    if (dir == nullptr) {
      unreadable("opendir", errno);
      continue;
    }
    std::vector<PluginCandidate> in_directory;
    int read_error = 0;
    for (;;) {
      errno = 0;
      dirent* ent = readdir(dir);
      if (ent == nullptr) {
        read_error = errno;
        break;
      }
      std::string file = ent->d_name;
      bool looks_like_library = file.size() > 3 && (file.compare(file.size() - 3, 3, ".so") == 0 ||
                                                    file.find(".so.") != std::string::npos);
      if (looks_like_library) in_directory.push_back({item + "/" + file, {}});
    }
    closedir(dir);
    std::sort(in_directory.begin(), in_directory.end(),
              [](const auto& a, const auto& b) { return a.path < b.path; });
    result.insert(result.end(), in_directory.begin(), in_directory.end());
    if (read_error != 0) unreadable("readdir", read_error);
  }
  return without_repeated_files(std::move(result));
}

}  // namespace accgraph::detail
