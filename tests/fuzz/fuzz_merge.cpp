// libFuzzer target for merge_perfetto_traces (perfetto.hpp): the input's bytes as a .pftrace
// file, merged alone and next to a valid trace of rank 1 of 2 (the 2026-11-25 audit, #81). Any
// bytes must either merge or be refused with accgraph::Error (InvalidArgument naming the file);
// anything else (another exception, a crash, a hang, unbounded memory: a huge world_size, a long
// or cyclic chain of tracks) is a finding. When the input merges next to rank 1, the summary must
// list both ranks in rank order. Files go to a per-process temporary directory, removed at exit.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/perfetto.hpp"

namespace {

using namespace accgraph::timing;

// A trace of rank `rank` of 2, as write_perfetto_trace writes it, with a calibrated clock.
std::string rank_trace(int rank) {
  RegionSample sample;
  sample.info.name = "step";
  sample.info.stream_id = 1;
  sample.start_ns = 5000;
  sample.end_ns = 6000;
  ReportSource source;
  source.backend = "cuda";
  source.device = rank;
  PerfettoOptions options;
  options.rank = rank;
  options.world_size = 2;
  options.clocks = {{"cuda", rank, -100, 50}};
  std::ostringstream out;
  write_perfetto_trace(out, {ReplayReport::from_samples(source, 1, 0, {sample})}, options);
  return out.str();
}

// The per-process scratch directory with the valid rank-1 trace; removed at exit.
struct Scratch {
  std::string dir, input, rank1;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/accgraph_fuzz_merge_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("fuzz_merge: mkdtemp");
      std::abort();
    }
    dir = pattern;
    input = dir + "/input.pftrace";
    rank1 = dir + "/rank1.pftrace";
    std::ofstream(rank1, std::ios::binary) << rank_trace(1);
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

Scratch& scratch() {
  static Scratch instance;
  return instance;
}

// Merges `paths` into memory; true when merged, false when refused with an accgraph::Error.
bool merge(const std::vector<std::string>& paths, MergeSummary& summary) {
  std::ostringstream out;
  try {
    summary = merge_perfetto_traces(out, paths);
    return true;
  } catch (const accgraph::Error& e) {
    if (e.code() != accgraph::ErrorCode::InvalidArgument) {
      std::fprintf(stderr, "fuzz_merge: an error other than InvalidArgument: %s\n", e.what());
      std::abort();
    }
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Scratch& s = scratch();
  {
    std::ofstream file(s.input, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  MergeSummary summary;
  merge({s.input}, summary);
  if (merge({s.rank1, s.input}, summary)) {
    // Merged next to rank 1: the input is rank 0 of 2, and the summary lists both in order.
    if (summary.ranks.size() != 2 || summary.ranks[0].rank != 0 || summary.ranks[1].rank != 1 ||
        summary.world_size != 2) {
      std::fprintf(stderr, "fuzz_merge: merged next to rank 1 but the summary is inconsistent\n");
      std::abort();
    }
  }
  return 0;
}
