// The backend registry: backend names to factories with priorities, plugin loading, and the
// default backend.
//
// It does not include the SPI: Backend and GraphImplInterface are declared here and defined in
// accgraph/spi/backend.hpp, which code that calls them (or implements them) includes; so does
// accgraph/spi/priority.hpp for register_backend's priorities.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

class Backend;             // accgraph/spi/backend.hpp
class GraphImplInterface;  // accgraph/spi/backend.hpp

/// Creates a backend. Throws Error(Unavailable, reason) when it cannot run here (no driver, no
/// device), which the Registry records and reports.
using BackendFactory = std::function<std::unique_ptr<Backend>()>;

/// What `accgraph backends` shows for one registered name.
struct BackendStatus {
  std::string name;
  int priority = 0;
  std::string origin;  ///< "built-in", "built-in module <path>", "plugin <path>"
  bool available = false;
  std::string unavailable_reason;
  std::vector<DeviceInfo> devices;
  Capabilities capabilities;  ///< of device 0 when available
};

/// A plugin library (or plugin path item) that was rejected: the file and why. The path is
/// escaped for display (plugin::escape_for_message in accgraph/spi/message_escape.hpp), like
/// every path and plugin name in a message, so it cannot forge lines of `accgraph backends`.
struct PluginFailure {
  std::string path;
  std::string reason;
};

/// Process-wide and thread-safe. Built-in backends are registered by an explicit list on first
/// use, then the plugins of ACCGRAPH_PLUGIN_PATH are loaded.
class ACCGRAPH_API Registry {
 public:
  static Registry& instance();

  /// Registers a factory; the backend is created on first use. A name already registered is an
  /// InvalidArgument error.
  void register_backend(const std::string& name, int priority, BackendFactory factory,
                        const std::string& origin = "registered by the application");
  bool contains(std::string_view name) const;
  /// Registered names, highest priority first.
  std::vector<std::string> names() const;
  /// Status of every registered backend (creates each to learn whether it is available).
  std::vector<BackendStatus> status();
  /// Plugins rejected so far.
  std::vector<PluginFailure> plugin_failures() const;

  /// The backend, created on first use. Unknown name: InvalidArgument listing what is
  /// registered; known but unavailable: Unavailable with the reason.
  Backend& backend(std::string_view name);
  /// ACCGRAPH_BACKEND if set, else the available backend of highest priority that has a device
  /// (a backend with no devices is never the default; named by ACCGRAPH_BACKEND, it is an
  /// Unavailable error saying so).
  std::string default_backend_name();

  /// RFC-style factory: a new graph implementation of the named backend.
  std::unique_ptr<GraphImplInterface> create_graph_impl(std::string_view name,
                                                        const GraphArgs& args);

  /// Loads one plugin library and registers its backend. Throws Error(PluginError) naming the
  /// file and the reason (also recorded in plugin_failures()); the registry is unchanged and the
  /// library closed again then. A truncated file, an entry point that throws, a bad table or a
  /// name already registered are all such rejections.
  void load_plugin(const std::string& path);

  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

 private:
  Registry();
  ~Registry();
  // Loads every plugin of an ACCGRAPH_PLUGIN_PATH value; failures are recorded, never thrown.
  void load_plugin_path(const std::string& path_list) noexcept;
  void record_failure(const std::string& path, std::string reason);
  struct State;
  std::unique_ptr<State> state_;
  friend struct RegistryAccess;
};

/// Shorthands for Registry::instance().
ACCGRAPH_API Backend& backend(std::string_view name = {});
ACCGRAPH_API void load_plugin(const std::string& path);
ACCGRAPH_API std::string default_backend_name();
ACCGRAPH_API std::unique_ptr<GraphImplInterface> create_graph_impl(std::string_view name,
                                                                   const GraphArgs& args = {});

}  // namespace accgraph
