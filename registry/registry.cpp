// The process-wide backend registry: names to factories with priorities, lazily created backends,
// availability reasons, plugin loading and the default backend.
#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.h"
#include "registry_internal.hpp"

namespace accgraph {

namespace {

struct Entry {
  std::string name;
  int priority = 0;
  std::string origin;
  BackendFactory factory;   // empty for names registered as unavailable
  std::mutex create_mutex;  // serialises the (possibly slow) creation of this backend
  bool attempted = false;   // guarded by create_mutex
  std::shared_ptr<Backend> backend;
  std::string unavailable_reason;
};

}  // namespace

struct Registry::State {
  mutable std::mutex mutex;  // guards entries and failures; never held while creating a backend
  std::vector<std::shared_ptr<Entry>> entries;
  std::vector<PluginFailure> failures;

  std::shared_ptr<Entry> find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& entry : entries)
      if (entry->name == name) return entry;
    return nullptr;
  }

  // Highest priority first; registration order breaks ties.
  std::vector<std::shared_ptr<Entry>> sorted() const {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::shared_ptr<Entry>> copy = entries;
    std::stable_sort(copy.begin(), copy.end(),
                     [](const auto& a, const auto& b) { return a->priority > b->priority; });
    return copy;
  }

  void add(std::shared_ptr<Entry> entry) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& existing : entries)
      if (existing->name == entry->name)
        throw Error(ErrorCode::InvalidArgument,
                    fmt::format("backend '{}' is already registered ({}): a second registration "
                                "({}) was refused; give the backend another name",
                                entry->name, existing->origin, entry->origin));
    entries.push_back(std::move(entry));
  }
};

// Gives registry internals access to the private state.
struct RegistryAccess {
  static Registry::State& state(Registry& registry) { return *registry.state_; }
};

namespace {

// Why a backend's code failed, called in a catch block: an accgraph::Error's message as it is,
// another exception's what() after "<what> failed: ". A backend must throw accgraph::Error;
// anything else still only makes the backend (or its device list) unavailable.
std::string current_failure(const char* what) {
  try {
    throw;
  } catch (const Error& e) {
    return e.message();
  } catch (const std::exception& e) {
    return fmt::format("{} failed: {}", what, e.what());
  } catch (...) {
    return fmt::format("{} threw an exception that is not a std::exception", what);
  }
}

// Creates the entry's backend once; afterwards returns it or nullptr with the reason kept.
Backend* ensure_created(Entry& entry) {
  std::lock_guard<std::mutex> lock(entry.create_mutex);
  if (entry.attempted) return entry.backend.get();
  entry.attempted = true;
  if (!entry.factory) return nullptr;  // registered as unavailable, reason already set
  try {
    std::unique_ptr<Backend> created = entry.factory();
    if (!created) {
      entry.unavailable_reason = "its factory returned no backend";
      return nullptr;
    }
    entry.backend = std::move(created);
  } catch (...) {
    entry.unavailable_reason = current_failure("its factory");
  }
  return entry.backend.get();
}

// The devices of a created backend, or the reason they cannot be listed.
struct DeviceList {
  std::vector<DeviceInfo> devices;
  std::string problem;  // empty when `devices` is the answer
};

DeviceList list_devices(const Backend& backend) {
  DeviceList list;
  try {
    list.devices = backend.devices();
  } catch (...) {
    list.problem = current_failure("listing its devices");
  }
  return list;
}

// Why a created backend cannot run work, or empty. It must list at least one device: a backend
// with none is listed unavailable and never chosen as the default, where it would make every
// default stream fail.
std::string why_unusable(const DeviceList& list) {
  if (!list.problem.empty()) return list.problem;
  if (list.devices.empty()) return "it has no devices";
  return {};
}

std::string describe_registered(const std::vector<std::shared_ptr<Entry>>& entries,
                                const std::vector<PluginFailure>& failures) {
  std::string text;
  for (const auto& entry : entries) {
    text += fmt::format("\n  {} (priority {}, {})", entry->name, entry->priority, entry->origin);
    std::lock_guard<std::mutex> lock(entry->create_mutex);
    if (entry->attempted && !entry->backend)
      text += fmt::format(": unavailable: {}", entry->unavailable_reason);
  }
  for (const auto& failure : failures)
    text += fmt::format("\n  rejected plugin {}: {}", failure.path, failure.reason);
  return text;
}

}  // namespace

Registry::Registry() : state_(std::make_unique<State>()) {}
Registry::~Registry() = default;

Registry& Registry::instance() {
  // Leaked on purpose: backends must not be torn down during static destruction, after the
  // vendor runtimes they use may already be gone. The initialiser never throws: a throwing
  // static initialiser would run again (and leak another Registry) on every call, so every
  // failure here becomes a rejected plugin or a warning instead.
  static Registry* registry = [] {
    auto* created = new Registry();
    try {
      detail::register_builtin_backends(*created);
    } catch (const std::exception& e) {
      log(LogLevel::Error, fmt::format("registering the built-in backends failed: {}", e.what()));
    } catch (...) {
      log(LogLevel::Error, "registering the built-in backends failed");
    }
    if (const char* plugin_path = std::getenv("ACCGRAPH_PLUGIN_PATH"))
      created->load_plugin_path(plugin_path);
    return created;
  }();
  return *registry;
}

void Registry::load_plugin_path(const std::string& path_list) noexcept {
  try {
    for (const detail::PluginCandidate& candidate : detail::plugin_candidates(path_list)) {
      if (!candidate.problem.empty()) {
        record_failure(candidate.path, candidate.problem);
        log(LogLevel::Warning, candidate.problem);
        continue;
      }
      try {
        load_plugin(candidate.path);
      } catch (const Error& e) {
        // Recorded in plugin_failures() by load_plugin; the process keeps working.
        log(LogLevel::Warning, e.what());
      }
    }
  } catch (const std::exception& e) {
    log(LogLevel::Error,
        fmt::format("loading the plugins of ACCGRAPH_PLUGIN_PATH failed: {}", e.what()));
  } catch (...) {
    log(LogLevel::Error, "loading the plugins of ACCGRAPH_PLUGIN_PATH failed");
  }
}

void Registry::record_failure(const std::string& path, std::string reason) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->failures.push_back(PluginFailure{plugin::escape_for_message(path), std::move(reason)});
}

void Registry::register_backend(const std::string& name, int priority, BackendFactory factory,
                                const std::string& origin) {
  if (name.empty())
    throw Error(ErrorCode::InvalidArgument,
                "register_backend: the backend name is empty: give the backend a name "
                "([a-z0-9_]+, unique in the process)");
  if (!factory)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("register_backend: backend '{}' has an empty factory: pass a "
                            "function that creates the backend",
                            name));
  auto entry = std::make_shared<Entry>();
  entry->name = name;
  entry->priority = priority;
  entry->origin = origin;
  entry->factory = std::move(factory);
  state_->add(std::move(entry));
}

void detail::register_unavailable(Registry& registry, const std::string& name, int priority,
                                  const std::string& origin, const std::string& reason) {
  auto entry = std::make_shared<Entry>();
  entry->name = name;
  entry->priority = priority;
  entry->origin = origin;
  entry->attempted = true;
  entry->unavailable_reason = reason;
  RegistryAccess::state(registry).add(std::move(entry));
}

bool Registry::contains(std::string_view name) const { return state_->find(name) != nullptr; }

std::vector<std::string> Registry::names() const {
  std::vector<std::string> result;
  for (const auto& entry : state_->sorted()) result.push_back(entry->name);
  return result;
}

std::vector<BackendStatus> Registry::status() {
  std::vector<BackendStatus> result;
  for (const auto& entry : state_->sorted()) {
    BackendStatus status;
    status.name = entry->name;
    status.priority = entry->priority;
    status.origin = entry->origin;
    if (Backend* backend = ensure_created(*entry)) {
      DeviceList list = list_devices(*backend);
      status.unavailable_reason = why_unusable(list);
      status.available = status.unavailable_reason.empty();
      status.devices = std::move(list.devices);
      try {
        if (!status.devices.empty()) status.capabilities = backend->capabilities(0);
      } catch (const Error& e) {
        status.available = false;
        status.unavailable_reason = e.message();
      } catch (...) {
        status.available = false;
        status.unavailable_reason =
            "reading the capabilities of device 0 threw an exception "
            "that is not an accgraph::Error";
      }
    } else {
      status.unavailable_reason = entry->unavailable_reason;
    }
    result.push_back(std::move(status));
  }
  return result;
}

std::vector<PluginFailure> Registry::plugin_failures() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->failures;
}

Backend& Registry::backend(std::string_view name) {
  std::shared_ptr<Entry> entry = state_->find(name);
  if (!entry) {
    auto entries = state_->sorted();
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("unknown backend '{}': registered backends are:{}\nuse one of these "
                            "names, or load a plugin (ACCGRAPH_PLUGIN_PATH or load_plugin)",
                            plugin::escape_for_message(name),
                            describe_registered(entries, plugin_failures())));
  }
  Backend* backend = ensure_created(*entry);
  if (backend == nullptr)
    throw Error(
        ErrorCode::Unavailable,
        fmt::format("backend '{}' is unavailable: {}", entry->name, entry->unavailable_reason),
        entry->name);
  return *backend;
}

std::string Registry::default_backend_name() {
  if (const char* chosen = std::getenv("ACCGRAPH_BACKEND"); chosen != nullptr && *chosen) {
    std::shared_ptr<Entry> entry = state_->find(chosen);
    if (!entry) {
      backend(chosen);  // throws the "unknown backend" error with the list
      return chosen;    // registered meanwhile by another thread
    }
    if (Backend* created = ensure_created(*entry)) {
      if (std::string problem = why_unusable(list_devices(*created)); !problem.empty())
        throw Error(ErrorCode::Unavailable,
                    fmt::format("ACCGRAPH_BACKEND names backend '{}', which cannot run work: {}; "
                                "pick another backend (see `accgraph backends`) or unset "
                                "ACCGRAPH_BACKEND",
                                entry->name, problem),
                    entry->name);
    }
    return chosen;  // an unavailable one fails with its reason where it is used
  }
  std::string skipped;
  for (const auto& entry : state_->sorted()) {
    Backend* created = ensure_created(*entry);
    if (created == nullptr) continue;
    std::string problem = why_unusable(list_devices(*created));
    if (problem.empty()) return entry->name;
    skipped += fmt::format("\n  {} is not used as the default: {}", entry->name, problem);
  }
  throw Error(ErrorCode::Unavailable,
              fmt::format("no backend is available:{}{}",
                          describe_registered(state_->sorted(), plugin_failures()), skipped));
}

std::unique_ptr<GraphImplInterface> Registry::create_graph_impl(std::string_view name,
                                                                const GraphArgs& args) {
  return backend(name.empty() ? std::string_view(default_backend_name()) : name).create_graph(args);
}

void Registry::load_plugin(const std::string& path) {
  // A rejection anywhere below destroys `plugin`, which closes the library (Note [Plugin ABI]).
  try {
    detail::LoadedPlugin plugin = detail::open_plugin(path);
    if (contains(plugin.name)) {
      std::shared_ptr<Entry> existing = state_->find(plugin.name);
      throw Error(ErrorCode::PluginError,
                  fmt::format("plugin '{}' was rejected: it registers backend '{}', which is "
                              "already registered ({}); rename the plugin's backend or remove one "
                              "of the two",
                              plugin.display_path, plugin.name, existing ? existing->origin : "?"));
    }
    std::string origin = fmt::format("plugin {}", plugin.display_path);
    if (!plugin.version.empty()) origin += fmt::format(" (version {})", plugin.version);
    register_backend(plugin.name, plugin.priority, std::move(plugin.factory), origin);
    plugin.library.keep_loaded();
  } catch (const Error& e) {
    record_failure(path, e.message());
    if (e.code() == ErrorCode::PluginError) throw;
    throw Error(ErrorCode::PluginError, fmt::format("plugin '{}' was rejected: {}",
                                                    plugin::escape_for_message(path), e.message()));
  } catch (const std::exception& e) {
    std::string reason = fmt::format("loading it failed: {}", e.what());
    record_failure(path, reason);
    throw Error(ErrorCode::PluginError, fmt::format("plugin '{}' was rejected: {}",
                                                    plugin::escape_for_message(path), reason));
  }
}

Backend& backend(std::string_view name) {
  Registry& registry = Registry::instance();
  if (name.empty()) return registry.backend(registry.default_backend_name());
  return registry.backend(name);
}

void load_plugin(const std::string& path) { Registry::instance().load_plugin(path); }

std::string default_backend_name() { return Registry::instance().default_backend_name(); }

std::unique_ptr<GraphImplInterface> create_graph_impl(std::string_view name,
                                                      const GraphArgs& args) {
  return Registry::instance().create_graph_impl(name, args);
}

}  // namespace accgraph
