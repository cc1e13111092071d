// Unit tests of the accgraph program's parsers (accgraph_cli_core, tools/cli.hpp): usage errors
// name the bound or the argument, and the demo's profiler options follow its options.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

using namespace accgraph::cli;
using Args = std::vector<std::string>;

namespace {

// Requires a UsageError from parse_command_line(args) whose message contains `text`.
void check_usage_error(const Args& args, const std::string& text) {
  CAPTURE(text);
  try {
    parse_command_line(args);
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, std::string(e.what()));
    CHECK(!e.usage.empty());
  }
}

Args demo(Args args) {
  args.insert(args.begin(), "demo");
  return args;
}

}  // namespace

TEST_CASE("commands: version, backends and help take no arguments but --help") {
  // Audit 4.3: `version extra` printed the version.
  check_usage_error({"version", "extra"}, "version takes no arguments, got 'extra'");
  check_usage_error({"--version", "extra"}, "--version takes no arguments, got 'extra'");
  check_usage_error({"backends", "--all"}, "backends takes no arguments, got '--all'");
  check_usage_error({"help", "demo"}, "help takes no arguments, got 'demo'");
  check_usage_error({}, "no command given");
  check_usage_error({"frobnicate"}, "unknown command 'frobnicate'");
  CHECK(parse_command_line({"version"}).command == Command::Version);
  CHECK_FALSE(parse_command_line({"version"}).help);
  CHECK(parse_command_line({"version", "--help"}).help);
  CHECK(parse_command_line({"backends", "-h"}).help);
  CHECK(parse_command_line({"--help"}).command == Command::Help);
}

TEST_CASE("demo: every count has a documented range and the error names it") {
  // Audit 4.4 and 4.7: no upper bounds, and a signed overflow for a huge --delay-us.
  check_usage_error(demo({"--layers", "1000000000"}),
                    "--layers expects a whole number from 1 to 64, got '1000000000'");
  check_usage_error(demo({"--layers", "65"}), "from 1 to 64, got '65'");
  check_usage_error(demo({"--layers", "0"}), "from 1 to 64, got '0'");
  check_usage_error(demo({"--layers", "-3"}), "got '-3'");
  check_usage_error(demo({"--layers", " 4"}), "got ' 4'");
  check_usage_error(demo({"--layers", "+4"}), "got '+4'");
  check_usage_error(demo({"--layers", "4x"}), "got '4x'");
  check_usage_error(demo({"--layers", ""}), "got ''");
  check_usage_error(demo({"--replays", "100001"}),
                    "--replays expects a whole number from 1 to 100000, got '100001'");
  check_usage_error(demo({"--delay-us", "9223372036854775807"}),
                    "--delay-us expects a whole number from 0 to 1000000, got "
                    "'9223372036854775807'");
  check_usage_error(demo({"--delay-us", "9223372036854775808"}), "from 0 to 1000000");
  check_usage_error(demo({"--delay-us", "99999999999999999999999"}), "from 0 to 1000000");
  check_usage_error(demo({"--delay-us", "1000001"}), "from 0 to 1000000, got '1000001'");
  check_usage_error(demo({"--ring", "65537"}),
                    "--ring expects a whole number from 1 to 65536, got '65537'");
  check_usage_error(demo({"--layers"}), "--layers needs a value");
  // The 2026-11-28 audit's rows, each value as tried: --layers 0 (E01), 65 (E02), -1 (E03),
  // 10^23 (E04), 1e3 (E05); --replays 0 (E06), 100001 (E07); --delay-us -5 (E08); --ring 0 (E09).
  const std::pair<std::vector<std::string>, std::string> rows[] = {
      {{"--layers", "0"}, "--layers expects a whole number from 1 to 64, got '0'"},
      {{"--layers", "65"}, "--layers expects a whole number from 1 to 64, got '65'"},
      {{"--layers", "-1"}, "--layers expects a whole number from 1 to 64, got '-1'"},
      {{"--layers", "100000000000000000000000"},
       "--layers expects a whole number from 1 to 64, got '100000000000000000000000'"},
      {{"--layers", "1e3"}, "--layers expects a whole number from 1 to 64, got '1e3'"},
      {{"--replays", "0"}, "--replays expects a whole number from 1 to 100000, got '0'"},
      {{"--replays", "100001"}, "--replays expects a whole number from 1 to 100000, got '100001'"},
      {{"--delay-us", "-5"}, "--delay-us expects a whole number from 0 to 1000000, got '-5'"},
      {{"--ring", "0"}, "--ring expects a whole number from 1 to 65536, got '0'"},
  };
  for (const auto& [args, message] : rows) {
    CAPTURE(args[0]);
    CAPTURE(args[1]);
    check_usage_error(demo(args), message);
  }

  const DemoOptions at_bounds = parse_demo_options(
      {"--layers", "64", "--replays", "100000", "--delay-us", "1000000", "--ring", "65536"});
  CHECK(at_bounds.layers == kMaxDemoLayers);
  CHECK(at_bounds.replays == kMaxDemoReplays);
  CHECK(at_bounds.delay_us == kMaxDemoDelayUs);
  CHECK(at_bounds.ring == kMaxDemoRing);
  CHECK(parse_demo_options({"--delay-us", "0"}).delay_us == 0);
}

TEST_CASE("demo: --trace bounds layers times replays") {
  check_usage_error(demo({"--replays", "100000", "--trace", "t.json"}),
                    "--layers times --replays must be at most 50000 with --trace, got 4 * 100000 "
                    "= 400000");
  // audit 2026-11-28 E11
  check_usage_error(demo({"--layers", "64", "--replays", "1000", "--trace", "t.json"}),
                    "--layers times --replays must be at most 50000 with --trace, got 64 * 1000 "
                    "= 64000");
  CHECK(parse_demo_options({"--layers", "5", "--replays", "10000", "--trace", "t.json"}).replays ==
        10000);
  CHECK(parse_demo_options({"--replays", "100000", "--csv", "t.csv"}).replays == 100000);
}

TEST_CASE("demo: reports are kept only for --trace") {
  // Audit 4.5: every report was kept, so memory grew with --replays.
  CHECK(demo_profiler_options(parse_demo_options({})).keep_reports.count() == 0);
  CHECK(demo_profiler_options(parse_demo_options({"--csv", "s.csv"})).keep_reports.count() == 0);
  CHECK(demo_profiler_options(parse_demo_options({"--trace", "t.json"})).keep_reports.count() ==
        accgraph::timing::KeepReports::all().count());
  const auto options =
      demo_profiler_options(parse_demo_options({"--strategy", "x", "--ring", "3"}));
  CHECK(options.marker_strategy == "x");
  CHECK(options.ring_depth == 3);
  CHECK(options.subtract_marker_overhead);
  CHECK_FALSE(demo_profiler_options(parse_demo_options({"--raw"})).subtract_marker_overhead);
}

TEST_CASE("demo: --trace picks the format by the file name, --lanes the lanes workload") {
  // The format itself is the library's (timing::trace_format_for, tests/unit/test_exporters.cpp).
  const DemoOptions perfetto = parse_demo_options({"--trace", "t.pftrace", "--lanes"});
  CHECK(perfetto.trace_path == "t.pftrace");
  CHECK(perfetto.lanes);
  CHECK_FALSE(parse_demo_options({}).lanes);
}

TEST_CASE("merge-traces: inputs, one -o, no input as output") {
  const CommandLine line =
      parse_command_line({"merge-traces", "r0.pftrace", "-o", "all.pftrace", "r1.pftrace"});
  CHECK(line.command == Command::MergeTraces);
  CHECK(line.merge.inputs == Args{"r0.pftrace", "r1.pftrace"});
  CHECK(line.merge.output_path == "all.pftrace");
  CHECK(parse_command_line({"merge-traces", "--help"}).help);
  check_usage_error({"merge-traces", "-o", "all.pftrace"}, "no input traces: give each rank's");
  check_usage_error({"merge-traces", "r0.pftrace"}, "no output file: give -o FILE.pftrace");
  check_usage_error({"merge-traces", "r0.pftrace", "-o"}, "-o needs a value");
  check_usage_error({"merge-traces", "r0.pftrace", "-o", "a", "--output", "b"},
                    "--output given twice");
  check_usage_error({"merge-traces", "r0.pftrace", "--frobnicate", "-o", "a"},
                    "unknown argument '--frobnicate'");
  check_usage_error({"merge-traces", "r0.pftrace", "-o", "r0.pftrace"},
                    "'r0.pftrace' is both an input and the output");
}
