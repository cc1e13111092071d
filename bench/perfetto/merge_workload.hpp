// Rank traces for measuring merge_perfetto_traces: `replays` reports of two nested regions per
// rank, written one rank at a time (bench_merge and perfetto_unit's bounded-memory check).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "accgraph/perfetto.hpp"

namespace accgraph::bench {

// Writes rank `rank`'s trace of `replays` replays to `path`; its file size in bytes.
inline uint64_t write_rank_trace(const std::string& path, int rank, int world, size_t replays) {
  using namespace accgraph::timing;
  ReportSource source;
  source.backend = "host";
  source.device = 0;
  source.device_name = "cpu";
  std::vector<ReplayReport> reports;
  reports.reserve(replays);
  const uint64_t t0 = 1'700'000'000'000'000'000ull + static_cast<uint64_t>(rank) * 137;
  for (size_t i = 0; i < replays; ++i) {
    const uint64_t at = t0 + i * 10'000;
    RegionSample step, comm;
    step.info.name = "step";
    step.info.stream_id = 1;
    step.start_ns = at;
    step.end_ns = at + 8'000;
    comm.info.name = "all_reduce";
    comm.info.stream_id = 1;
    comm.info.lane = "comm";
    comm.start_ns = at + 2'000;
    comm.end_ns = at + 7'000;
    reports.push_back(ReplayReport::from_samples(source, 1, i, {step, comm}));
  }
  PerfettoOptions options;
  options.rank = rank;
  options.world_size = world;
  options.host = "host-" + std::to_string(rank % 8);
  options.clocks = {{"host", 0, 0, 50}};
  options.host_clock_offsets = {{rank * 1000, 20, t0}, {rank * 1000 + 50, 20, t0 + 1'000'000'000}};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  write_perfetto_trace(out, reports, options);
  out.flush();
  return static_cast<uint64_t>(out.tellp());
}

}  // namespace accgraph::bench
