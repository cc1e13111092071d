// The accgraph program's pieces: the command-line parsers, the commands and the errors they
// throw. Everything but main() is the static library accgraph_cli_core, so tests and fuzzers can
// call the parsers on their own.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "accgraph/timing.hpp"

namespace accgraph::cli {

/// A bad command line: the program prints the message and the usage, and exits with code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& message, std::string usage_text)
      : std::runtime_error(message), usage(std::move(usage_text)) {}
  std::string usage;
};

/// A file the program cannot open or write: the message names it, the option and the system's
/// reason; the program exits with code 1.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Upper bounds of the demo's options (why each: kDemoUsage in demo.cpp and README.md).
inline constexpr long kMaxDemoLayers = 64;
inline constexpr long kMaxDemoReplays = 100000;
inline constexpr long kMaxDemoDelayUs = 1000000;
inline constexpr long kMaxDemoRing = 65536;
/// With --trace: at most this many layers times replays.
inline constexpr long kMaxDemoTracedLayers = 50000;

/// `accgraph demo`'s options.
struct DemoOptions {
  bool help = false;  ///< --help: print the usage and run nothing
  std::string backend;
  long layers = 4;
  long replays = 50;
  std::string trace_path;  ///< its format by its name (timing::write_trace_file)
  std::string csv_path;
  std::string strategy;
  long ring = 0;
  long delay_us = 50;
  bool lanes = false;  ///< --lanes: the multi-stream workload with lanes
  bool raw = false;    ///< --raw: durations as the markers read them (no overhead taken off)
};

/// Parses the arguments after `demo`. Throws UsageError.
DemoOptions parse_demo_options(const std::vector<std::string>& args);
/// The profiler options of a demo run: reports are kept only when --trace needs them, so memory
/// stays flat over the replays otherwise (statistics need no reports).
timing::ProfilerOptions demo_profiler_options(const DemoOptions& options);
/// Runs the demo; returns the exit code. Opens --trace and --csv files before anything else.
int run_demo(const DemoOptions& options);

/// `accgraph merge-traces`'s options.
struct MergeOptions {
  bool help = false;
  std::vector<std::string> inputs;  ///< one .pftrace per rank
  std::string output_path;
};

/// Parses the arguments after `merge-traces`. Throws UsageError.
MergeOptions parse_merge_options(const std::vector<std::string>& args);
/// Runs the merge and prints each rank's clock offsets; returns the exit code.
int run_merge(const MergeOptions& options);

enum class Command { Help, Backends, Demo, MergeTraces, Version };

/// A parsed command line.
struct CommandLine {
  Command command = Command::Help;
  bool help = false;   ///< `accgraph <command> --help`
  DemoOptions demo;    ///< for Command::Demo
  MergeOptions merge;  ///< for Command::MergeTraces
};

/// Parses the program's arguments (without argv[0]). Throws UsageError.
CommandLine parse_command_line(const std::vector<std::string>& args);
/// Runs a parsed command line; returns the exit code.
int run_command(const CommandLine& command_line);
/// The whole program for main(): parses, runs, prints any error on stderr. Returns the exit
/// code: 0, 1 on an error, 2 on a bad command line.
int run_program(const std::vector<std::string>& args);

int run_backends();

/// Parses a whole number from `minimum` to `maximum` for option `option` (a UsageError
/// naming both bounds otherwise).
long parse_count(const std::string& option, const std::string& text, long minimum, long maximum,
                 const std::string& usage);

}  // namespace accgraph::cli
