// `accgraph merge-traces`: the Perfetto traces of a job's ranks merged into one timeline on the
// host clock (accgraph::timing::merge_perfetto_traces).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "output_file.hpp"

#if ACCGRAPH_CLI_WITH_PERFETTO
#include "accgraph/perfetto.hpp"
#endif

namespace accgraph::cli {

namespace {

const char* const kMergeUsage =
    "usage: accgraph merge-traces RANK_TRACE... -o OUTPUT\n"
    "\n"
    "Merges the Perfetto traces (.pftrace) that the ranks of one job wrote, each with its rank,\n"
    "world size and device clock offsets (accgraph::timing::PerfettoOptions), into one trace\n"
    "on the host clock: one process per rank and device, every event moved by its device's\n"
    "recorded clock offset and, where measured, its host's clock offset against rank 0's\n"
    "host (drift interpolated). Prints each rank's offsets and the alignment uncertainty.\n"
    "\n"
    "  -o, --output FILE  the merged trace; replaced only once the merge succeeded (an\n"
    "                     existing file is left as it was otherwise); it must not be one of the\n"
    "                     inputs under any name (link, other spelling)\n";

#if ACCGRAPH_CLI_WITH_PERFETTO
// A device clock's offset against its host's clock in the table: what a reader can use. Most
// device clocks count from their own epoch (boot, device reset), so their offset against
// CLOCK_REALTIME is decades, a raw -1.8e18 ns says nothing; an offset of a second or more reads
// "own epoch", smaller ones in us (a device clock that follows the host's).
std::string offset_text(int64_t ns) {
  if (ns >= 1'000'000'000 || ns <= -1'000'000'000) return "own epoch";
  return fmt::format("{:+.3f} us", static_cast<double>(ns) / 1e3);
}

// An uncertainty in the table: nanoseconds, or "unknown (saturated)" (add_uncertainties).
std::string uncertainty_text(uint64_t ns) {
  return ns == UINT64_MAX ? "unknown (saturated)" : std::to_string(ns);
}

// One row per rank and device clock: its offset against its host and the alignment's
// uncertainty, the host clock's part included.
void print_rank_table(const timing::MergeSummary& summary) {
  fmt::print("{:>5}  {:<16}  {:<20}  {:>14}  {:>16}  {:>10}  {}\n", "rank", "host", "device",
             "device-host", "uncertainty_ns", "packets", "file");
  for (const timing::MergedRank& rank : summary.ranks) {
    const std::string host = rank.host.empty() ? "-" : rank.host;
    // The host clock's part: its measured offsets' larger uncertainty, else its declared bound.
    uint64_t host_uncertainty = rank.host_clock_uncertainty_ns;
    if (!rank.host_clock_offsets.empty()) host_uncertainty = 0;
    for (const timing::HostClockOffset& h : rank.host_clock_offsets)
      host_uncertainty = std::max(host_uncertainty, h.uncertainty_ns);
    host_uncertainty = timing::add_uncertainties(host_uncertainty, rank.host_clock_drift_ns);
    for (const timing::DeviceClockOffset& clock : rank.clocks)
      fmt::print(
          "{:>5}  {:<16}  {:<20}  {:>14}  {:>16}  {:>10}  {}\n", rank.rank, host,
          fmt::format("{} device {}", clock.backend, clock.device), offset_text(clock.offset_ns),
          uncertainty_text(timing::add_uncertainties(clock.uncertainty_ns, host_uncertainty)),
          rank.packets, rank.path);
    for (const std::string& device : rank.uncalibrated)
      fmt::print("{:>5}  {:<16}  {:<20}  {:>14}  {:>16}  {:>10}  {}\n", rank.rank, host, device,
                 "none", "unknown", rank.packets, rank.path);
  }
}

// Each rank's measured host clock offsets against rank 0's host, where any were measured.
void print_host_clocks(const timing::MergeSummary& summary) {
  bool header = false;
  for (const timing::MergedRank& rank : summary.ranks) {
    if (rank.host_clock_offsets.empty()) continue;
    if (!header) fmt::print("\nhost clocks against rank 0's host (measured over the job):\n");
    header = true;
    std::string measured;
    for (size_t i = 0; i < rank.host_clock_offsets.size(); ++i) {
      const timing::HostClockOffset& h = rank.host_clock_offsets[i];
      measured += fmt::format("{}{:+} ns +-{} ns {}", i == 0 ? "" : ", ", h.offset_ns,
                              h.uncertainty_ns, i == 0 ? "at start" : "at flush");
    }
    fmt::print("{:>5}  {:<16}  {}\n", rank.rank, rank.host.empty() ? "-" : rank.host, measured);
  }
}
#endif

}  // namespace

MergeOptions parse_merge_options(const std::vector<std::string>& args) {
  MergeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", arg), kMergeUsage);
      if (!options.output_path.empty())
        throw UsageError(fmt::format("{} given twice: give one output file", arg), kMergeUsage);
      options.output_path = args[++i];
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError(fmt::format("unknown argument '{}'", arg), kMergeUsage);
    } else {
      options.inputs.push_back(arg);
    }
  }
  if (options.help) return options;
  if (options.inputs.empty())
    throw UsageError("no input traces: give each rank's .pftrace file", kMergeUsage);
  if (options.output_path.empty())
    throw UsageError("no output file: give -o FILE.pftrace", kMergeUsage);
  for (const std::string& input : options.inputs)
    if (input == options.output_path)
      throw UsageError(fmt::format("'{}' is both an input and the output: the merge would "
                                   "overwrite a trace it reads; choose another output file",
                                   input),
                       kMergeUsage);
  return options;
}

int run_merge(const MergeOptions& options) {
  if (options.help) {
    std::fputs(kMergeUsage, stdout);
    return 0;
  }
#if ACCGRAPH_CLI_WITH_PERFETTO
  OutputFile output(options.output_path, "-o", "the merged Perfetto trace");  // checked now
  timing::MergeSummary summary;
  try {
    summary = timing::merge_perfetto_trace_files(options.output_path, options.inputs);
  } catch (const timing::FileError& e) {
    throw OutputError(with_option(e, options.output_path, "-o"));
  }
  fmt::print("merged {} trace(s) of a job of {} rank(s) into {}\n\n", summary.ranks.size(),
             summary.world_size, options.output_path);
  print_rank_table(summary);
  print_host_clocks(summary);
  fmt::print(
      "\nalignment uncertainty between ranks: {} (device offsets and host clocks; "
      "the two largest added)\n",
      summary.alignment_uncertainty_ns == UINT64_MAX
          ? std::string("unknown (see the warnings)")
          : fmt::format("+-{} ns", summary.alignment_uncertainty_ns));
  for (const std::string& warning : summary.warnings) fmt::print("warning: {}\n", warning);
  return 0;
#else
  throw OutputError(
      "merge-traces needs Perfetto support, which this build of accgraph lacks (libprotobuf and "
      "protoc were not found when it was configured): install libprotobuf-dev and "
      "protobuf-compiler and configure again");
#endif
}

}  // namespace accgraph::cli
