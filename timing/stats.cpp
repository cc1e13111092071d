// StatsAccumulator: per-region-path statistics over every report it is fed.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "accgraph/report.hpp"
#include "stats_internal.hpp"

namespace accgraph::timing {

// Every sample is kept (8 bytes per region per report) so percentiles are exact, by nearest
// rank; a reservoir would bound memory but make p50/p95 approximate, and exact numbers are what
// the tests and the comparisons between backends need.
struct StatsAccumulator::State {
  struct Series {
    std::string path;
    int depth = 0;
    std::vector<uint64_t> samples;
    uint64_t unmeasurable = 0;
    void add(const RegionTiming& region) {
      if (region.measurable)
        samples.push_back(region.duration_ns);
      else
        ++unmeasurable;
    }
  };
  mutable std::mutex mutex;
  std::vector<Series> series;                       // in first-seen order
  std::unordered_map<std::string, size_t> by_path;  // path -> index into series
  uint64_t generation = 1;                          // bumped by clear(): cached indices expire

  // Caller holds mutex. A find before the emplace: the common case (a path seen before) then
  // allocates nothing.
  size_t index_of(const std::string& path, int depth) {
    auto found = by_path.find(path);
    if (found != by_path.end()) return found->second;
    by_path.emplace(path, series.size());
    series.push_back({path, depth, {}});
    return series.size() - 1;
  }
};

StatsAccumulator::StatsAccumulator() : state_(std::make_unique<State>()) {}
StatsAccumulator::~StatsAccumulator() = default;

void StatsAccumulator::add(const ReplayReport& report) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const RegionTiming& region : report.regions)
    state_->series[state_->index_of(region.path, region.depth)].add(region);
}

void StatsAccess::add(StatsAccumulator& stats, SeriesCache& cache, const ReplayReport& report) {
  StatsAccumulator::State& state = *stats.state_;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (cache.generation != state.generation || cache.series.size() != report.regions.size()) {
    cache.series.clear();
    for (const RegionTiming& region : report.regions)
      cache.series.push_back(state.index_of(region.path, region.depth));
    cache.generation = state.generation;
  }
  for (size_t i = 0; i < report.regions.size(); ++i)
    state.series[cache.series[i]].add(report.regions[i]);
}

namespace {

// Nearest rank: the smallest sample such that at least p percent of the samples are <= it.
double nearest_rank(const std::vector<uint64_t>& sorted, double percent) {
  auto rank = static_cast<size_t>(std::ceil(percent / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]);
}

}  // namespace

std::vector<RegionStats> StatsAccumulator::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<RegionStats> result;
  result.reserve(state_->series.size());
  for (const State::Series& s : state_->series) {
    RegionStats out;
    out.path = s.path;
    out.depth = s.depth;
    out.count = s.samples.size();
    out.unmeasurable = s.unmeasurable;
    if (!s.samples.empty()) {
      std::vector<uint64_t> sorted = s.samples;
      std::sort(sorted.begin(), sorted.end());
      double sum = 0;
      for (uint64_t v : sorted) sum += static_cast<double>(v);
      out.min_ns = static_cast<double>(sorted.front());
      out.max_ns = static_cast<double>(sorted.back());
      out.mean_ns = sum / static_cast<double>(sorted.size());
      out.p50_ns = nearest_rank(sorted, 50);
      out.p95_ns = nearest_rank(sorted, 95);
    }
    result.push_back(std::move(out));
  }
  return result;
}

void StatsAccumulator::clear() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->series.clear();
  state_->by_path.clear();
  ++state_->generation;
}

}  // namespace accgraph::timing
