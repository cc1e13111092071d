// libFuzzer target for the accgraph program's argument parsing (accgraph_cli_core, cli.hpp):
// the input, split at NUL bytes, is the argument vector. parse_command_line must either succeed
// with options inside their documented bounds or throw UsageError with a message and the usage;
// anything else is a crash. Nothing runs: no demo, no backend listing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

using namespace accgraph::cli;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_cli_args: %s\n", what.c_str());
  std::abort();
}

void require(bool condition, const char* what) {
  if (!condition) fail(what);
}

void check_demo_options(const DemoOptions& o) {
  require(o.layers >= 1 && o.layers <= kMaxDemoLayers, "--layers out of its bounds");
  require(o.replays >= 1 && o.replays <= kMaxDemoReplays, "--replays out of its bounds");
  require(o.delay_us >= 0 && o.delay_us <= kMaxDemoDelayUs, "--delay-us out of its bounds");
  require(o.ring >= 0 && o.ring <= kMaxDemoRing, "--ring out of its bounds");
  require(o.trace_path.empty() || o.layers * o.replays <= kMaxDemoTracedLayers,
          "--trace with too many layers times replays");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string arg;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(std::move(arg));
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  if (size > 0) args.push_back(std::move(arg));

  try {
    const CommandLine line = parse_command_line(args);
    if (line.command == Command::Demo) {
      check_demo_options(line.demo);
      require(line.help == line.demo.help, "demo --help not passed on");
      // The demo's own parser gives the same options.
      const DemoOptions again =
          parse_demo_options(std::vector<std::string>(args.begin() + 1, args.end()));
      require(again.layers == line.demo.layers && again.trace_path == line.demo.trace_path,
              "parse_demo_options disagrees with parse_command_line");
      (void)demo_profiler_options(line.demo);
    }
  } catch (const UsageError& e) {
    require(std::string(e.what()).size() > 0, "a UsageError without a message");
    require(e.usage.rfind("usage: accgraph", 0) == 0, "a UsageError without the usage");
  } catch (const std::exception& e) {
    fail(std::string("a foreign exception: ") + e.what());
  }
  return 0;
}
