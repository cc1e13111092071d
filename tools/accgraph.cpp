// The `accgraph` program's command line: the top-level parser, `accgraph backends` (lists the
// backends), `accgraph version`, and run_program, which main() calls.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/plugin.h"
#include "cli.hpp"

namespace accgraph::cli {

namespace {

const char* const kUsage =
    "usage: accgraph <command> [options]\n"
    "\n"
    "commands:\n"
    "  backends      list the registered backends, their devices and capabilities, and why\n"
    "                any is unavailable\n"
    "  demo          capture a small layered workload with a timed region per layer and per\n"
    "                operation, replay it and print per-region statistics\n"
    "  merge-traces  merge the Perfetto traces of a job's ranks into one timeline on the host\n"
    "                clock\n"
    "  version       print the library version\n"
    "\n"
    "`accgraph <command> --help` describes a command's options.\n"
    "environment: ACCGRAPH_BACKEND (default backend), ACCGRAPH_PLUGIN_PATH (plugin directories)\n";

const char* const kBackendsUsage =
    "usage: accgraph backends\n"
    "\n"
    "Lists every registered backend (built-in, built-in module or plugin) with its priority,\n"
    "origin, devices and capabilities, or the reason it is unavailable, and every plugin\n"
    "library that was rejected.\n";

const char* const kVersionUsage =
    "usage: accgraph version\n"
    "\n"
    "Prints the library version and the plugin ABI version.\n";

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// Parses the arguments of a command that takes none but --help.
bool parse_help_only(const std::string& command, const std::vector<std::string>& args,
                     const char* usage) {
  bool help = false;
  for (const std::string& arg : args) {
    if (!is_help(arg))
      throw UsageError(fmt::format("{} takes no arguments, got '{}'", command, arg), usage);
    help = true;
  }
  return help;
}

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

long parse_count(const std::string& option, const std::string& text, long minimum, long maximum,
                 const std::string& usage) {
  // Digits only: strtol alone would also take leading blanks and a sign.
  bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  long value = 0;
  if (digits) {
    errno = 0;
    value = std::strtol(text.c_str(), nullptr, 10);
  }
  if (!digits || errno == ERANGE || value < minimum || value > maximum)
    throw UsageError(fmt::format("{} expects a whole number from {} to {}, got '{}'", option,
                                 minimum, maximum, text),
                     usage);
  return value;
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("no command given", kUsage);
  const std::string& command = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  CommandLine line;
  if (command == "--help" || command == "-h" || command == "help") {
    if (!rest.empty())
      throw UsageError(fmt::format("{} takes no arguments, got '{}': use `accgraph <command> "
                                   "--help` for a command's options",
                                   command, rest.front()),
                       kUsage);
    line.command = Command::Help;
  } else if (command == "backends") {
    line.command = Command::Backends;
    line.help = parse_help_only(command, rest, kBackendsUsage);
  } else if (command == "demo") {
    line.command = Command::Demo;
    line.demo = parse_demo_options(rest);
    line.help = line.demo.help;
  } else if (command == "merge-traces") {
    line.command = Command::MergeTraces;
    line.merge = parse_merge_options(rest);
    line.help = line.merge.help;
  } else if (command == "version" || command == "--version") {
    line.command = Command::Version;
    line.help = parse_help_only(command, rest, kVersionUsage);
  } else {
    throw UsageError(fmt::format("unknown command '{}'", command), kUsage);
  }
  return line;
}

int run_backends() {
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
    fmt::print(
        "  multi-stream capture: {}, host calls: {}, timed delay: {}, graph update: {}, "
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

int run_command(const CommandLine& line) {
  switch (line.command) {
    case Command::Help:
      std::fputs(kUsage, stdout);
      return 0;
    case Command::Backends:
      if (line.help) {
        std::fputs(kBackendsUsage, stdout);
        return 0;
      }
      return run_backends();
    case Command::Demo:
      return run_demo(line.demo);
    case Command::MergeTraces:
      return run_merge(line.merge);
    case Command::Version: {
      if (line.help) {
        std::fputs(kVersionUsage, stdout);
        return 0;
      }
      Version v = library_version();
      fmt::print("accgraph {}.{}.{} (plugin ABI {}.{})\n", v.major, v.minor, v.patch,
                 ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR);
      return 0;
    }
  }
  return 1;  // unreachable: every Command is handled above
}

int run_program(const std::vector<std::string>& args) {
  int code = 0;
  try {
    code = run_command(parse_command_line(args));
  } catch (const UsageError& e) {
    fmt::print(stderr, "accgraph: {}\n\n{}", e.what(), e.usage);
    return 2;
  } catch (const OutputError& e) {
    fmt::print(stderr, "accgraph: {}\n", e.what());
    return 1;
  } catch (const Error& e) {
    fmt::print(stderr, "accgraph: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "accgraph: unexpected error: {}\n", e.what());
    return 1;
  }
  // What went to standard output must have arrived too (a full disk, a closed pipe).
  errno = 0;  // the first failing flush sets it (std::cout flushes stdout too)
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    fmt::print(stderr, "accgraph: writing to standard output failed{}{}\n", errno != 0 ? ": " : "",
               errno != 0 ? std::strerror(errno) : "");
    return 1;
  }
  return code;
}

}  // namespace accgraph::cli
