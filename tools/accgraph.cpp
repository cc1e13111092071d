// The `accgraph` program: `accgraph backends` lists the backends, `accgraph demo` captures,
// times and replays a small layered workload.
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/plugin.h"
#include "cli.hpp"

namespace accgraph::cli {

namespace {

const char* const kUsage =
    "usage: accgraph <command> [options]\n"
    "\n"
    "commands:\n"
    "  backends   list the registered backends, their devices and capabilities, and why any\n"
    "             is unavailable\n"
    "  demo       capture a small layered workload with a timed region per layer and per\n"
    "             operation, replay it and print per-region statistics\n"
    "  version    print the library version\n"
    "\n"
    "`accgraph <command> --help` describes a command's options.\n"
    "environment: ACCGRAPH_BACKEND (default backend), ACCGRAPH_PLUGIN_PATH (plugin directories)\n";

const char* const kBackendsUsage =
    "usage: accgraph backends\n"
    "\n"
    "Lists every registered backend (built-in, built-in module or plugin) with its priority,\n"
    "origin, devices and capabilities, or the reason it is unavailable, and every plugin\n"
    "library that was rejected.\n";

std::string join_modes(const Capabilities& caps) {
  std::string text = "Default";
  for (CaptureMode mode : caps.capture_modes) text += fmt::format(",{}", to_string(mode));
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ",") + item;
  return text.empty() ? "-" : text;
}

}  // namespace

long parse_count(const std::string& option, const std::string& text, long minimum,
                 const std::string& usage) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || value < minimum)
    throw UsageError(fmt::format("{} expects a whole number >= {}, got '{}'", option, minimum,
                                 text),
                     usage);
  return value;
}

int run_backends(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::fputs(kBackendsUsage, stdout);
      return 0;
    }
    throw UsageError(fmt::format("unknown argument '{}'", arg), kBackendsUsage);
  }
  Registry& registry = Registry::instance();
  std::string default_name;
  try {
    default_name = registry.default_backend_name();
  } catch (const Error& e) {
    default_name = fmt::format("(none: {})", e.message());
  }
  fmt::print("default backend: {}\n\n", default_name);
  for (const BackendStatus& status : registry.status()) {
    fmt::print("{} (priority {}, {})\n", status.name, status.priority, status.origin);
    if (!status.available) {
      fmt::print("  unavailable: {}\n\n", status.unavailable_reason);
      continue;
    }
    for (const DeviceInfo& device : status.devices)
      fmt::print("  device {}: {}\n", device.index, device.name);
    const Capabilities& caps = status.capabilities;
    fmt::print("  capture modes: {}\n", join_modes(caps));
    fmt::print("  multi-stream capture: {}, host calls: {}, timed delay: {}, graph update: {}, "
               "pool sharing: {}\n",
               caps.multi_stream_capture ? "yes" : "no", caps.host_calls ? "yes" : "no",
               caps.timed_delay ? "yes" : "no", caps.graph_update ? "yes" : "no",
               caps.pool_sharing ? "yes" : "no");
    fmt::print("  timestamp markers: {} (ring depth {}, resolution {} ns)\n\n",
               join(caps.marker_strategies), caps.marker_ring_depth, caps.timer_resolution_ns);
  }
  for (const PluginFailure& failure : registry.plugin_failures())
    fmt::print("rejected plugin {}: {}\n", failure.path, failure.reason);
  return 0;
}

}  // namespace accgraph::cli

int main(int argc, char** argv) {
  using namespace accgraph::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string command = args.front();
  args.erase(args.begin());
  try {
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (command == "backends") return run_backends(args);
    if (command == "demo") return run_demo(args);
    if (command == "version" || command == "--version") {
      accgraph::Version v = accgraph::library_version();
      fmt::print("accgraph {}.{}.{} (plugin ABI {}.{})\n", v.major, v.minor, v.patch,
                 ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR);
      return 0;
    }
    throw UsageError(fmt::format("unknown command '{}'", command), kUsage);
  } catch (const UsageError& e) {
    fmt::print(stderr, "accgraph: {}\n\n{}", e.what(), e.usage);
    return 2;
  } catch (const accgraph::Error& e) {
    fmt::print(stderr, "accgraph: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "accgraph: unexpected error: {}\n", e.what());
    return 1;
  }
}
