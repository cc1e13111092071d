// StatsAccumulator: per-region-path statistics over every report it is fed, in bounded memory
// (a quantile sketch per region, the default) or from every sample (StatsMode::Exact).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "stats_internal.hpp"

namespace accgraph::timing {

namespace {

// Note [Stats sketch]
// A log-linear histogram in the style of HdrHistogram. A duration below 128 ns has a bucket of
// its own (exact). Above, each power-of-two range [2^e, 2^(e+1)), e = 7..63, is split into 64
// equal buckets of width w = 2^(e-6), so w <= lo/64 for a bucket [lo, lo + w). Buckets: 128 +
// 57 * 64 = 3776 (kSketchMaxBuckets) for 0 .. 2^64-1. A bucket is reported as the midpoint of
// its integers, lo + (w-1)/2, which is within (w-1)/2 < lo/128 <= v/128 of every v in it.
// The counts are exact, so the quantile walk finds the bucket that holds the nearest-rank
// sample itself: p50/p95 are within 1/128 (0.79%) relative error of the exact nearest-rank
// values. Clamping them to [min, max] only moves them closer (the true value lies in both).
// The index is a count-leading-zeros and a shift, no logarithm, so add() stays cheap.
constexpr int kSubBucketBits = 6;                       // 64 buckets per power of two
constexpr uint64_t kExactBelow = 2u << kSubBucketBits;  // 128: one bucket per value below

int highest_bit(uint64_t v) {  // v != 0
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(v);
#else
  int bit = 0;
  while (v >>= 1) ++bit;
  return bit;
#endif
}

size_t bucket_of(uint64_t v) {
  if (v < kExactBelow) return static_cast<size_t>(v);
  const int shift = highest_bit(v) - kSubBucketBits;  // 1 .. 57
  return (static_cast<size_t>(shift) << kSubBucketBits) + static_cast<size_t>(v >> shift);
}

// The midpoint of the integers in bucket `index`.
double bucket_value(size_t index) {
  if (index < kExactBelow) return static_cast<double>(index);
  const int shift = static_cast<int>(index >> kSubBucketBits) - 1;
  const uint64_t mantissa = (index & ((1u << kSubBucketBits) - 1)) | (1u << kSubBucketBits);
  const uint64_t lo = mantissa << shift;
  const uint64_t width = uint64_t{1} << shift;
  return static_cast<double>(lo) + static_cast<double>(width - 1) / 2;
}

static_assert(kSketchMaxBuckets == size_t{64 - kSubBucketBits + 1} << kSubBucketBits,
              "kSketchMaxBuckets must be bucket_of(UINT64_MAX) + 1");

// Counts of a contiguous window [low, low + counts.size()) of buckets, grown on demand.
struct Sketch {
  size_t low = 0;
  std::vector<uint64_t> counts;

  void add(uint64_t v) {
    const size_t index = bucket_of(v);
    if (index - low >= counts.size()) {  // also when index < low: the difference wraps
      if (counts.empty()) {
        low = index;
        counts.assign(1, 0);
      } else {
        grow_to(index);
      }
    }
    ++counts[index - low];
  }

  // At least doubles the window (amortised O(1) per add), never past kSketchMaxBuckets.
  void grow_to(size_t index) {
    const size_t size = counts.size();
    const size_t want = std::max(std::max(low + size, index + 1) - std::min(low, index), 2 * size);
    size_t new_low = low;
    size_t new_end = low + size;
    if (index < low)
      new_low = new_end > want ? new_end - want : 0;
    else
      new_end = std::min(low + want, kSketchMaxBuckets);
    std::vector<uint64_t> grown(new_end - new_low, 0);
    std::copy(counts.begin(), counts.end(), grown.begin() + static_cast<ptrdiff_t>(low - new_low));
    counts.swap(grown);
    low = new_low;
  }

  // The bucket holding the nearest-rank sample `rank` (1-based, <= the total count).
  double value_at_rank(uint64_t rank) const {
    uint64_t seen = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (seen >= rank) return bucket_value(low + i);
    }
    return bucket_value(low + counts.size() - 1);  // not reached: rank <= the total
  }
};

// Nearest rank: the smallest sample such that at least p percent of the samples are <= it.
uint64_t nearest_rank_of(uint64_t count, double percent) {
  auto rank = static_cast<uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(count)));
  return std::clamp<uint64_t>(rank, 1, count);
}

}  // namespace

// Exact: every sample is kept (8 bytes per region per report, and as much for its self time) and
// p50/p95 are exact, by nearest rank. Sketch: count, min, max and a 128-bit integer sum are exact,
// p50/p95 come from the sketch (Note [Stats sketch]); at most kSketchMaxBuckets counts per region
// and as many for its self times.
struct StatsAccumulator::State {
  // One series of durations (a region's, or its self times'). What add() touches in Sketch
  // mode comes first, in one or two cache lines.
  struct Durations {
    uint64_t count = 0;
    uint64_t min = UINT64_MAX, max = 0;  // meaningful once count != 0
    uint64_t sum_low = 0, sum_high = 0;  // the exact sum, sum_high * 2^64 + sum_low
    Sketch sketch;
    std::vector<uint64_t> samples;  // StatsMode::Exact

    void add(uint64_t v, StatsMode mode) {
      if (mode == StatsMode::Exact) {
        samples.push_back(v);
        return;
      }
      min = std::min(min, v);
      max = std::max(max, v);
      ++count;
      sum_low += v;
      if (sum_low < v) ++sum_high;
      sketch.add(v);
    }

    // count, min, mean, p50, p95 and max, as RegionStats documents them.
    struct Summary {
      uint64_t count = 0;
      double min = 0, mean = 0, p50 = 0, p95 = 0, max = 0;
    };
    Summary summarize(StatsMode mode) {
      Summary out;
      if (mode == StatsMode::Exact) {
        out.count = samples.size();
        if (samples.empty()) return out;
        std::vector<uint64_t>& sorted = samples;
        std::sort(sorted.begin(), sorted.end());
        double sum = 0;
        for (uint64_t v : sorted) sum += static_cast<double>(v);
        out.min = static_cast<double>(sorted.front());
        out.max = static_cast<double>(sorted.back());
        out.mean = sum / static_cast<double>(sorted.size());
        out.p50 = static_cast<double>(sorted[nearest_rank_of(sorted.size(), 50) - 1]);
        out.p95 = static_cast<double>(sorted[nearest_rank_of(sorted.size(), 95) - 1]);
        return out;
      }
      out.count = count;
      if (count == 0) return out;
      out.min = static_cast<double>(min);
      out.max = static_cast<double>(max);
      const double sum =
          std::ldexp(static_cast<double>(sum_high), 64) + static_cast<double>(sum_low);
      out.mean = std::clamp(sum / static_cast<double>(count), out.min, out.max);
      out.p50 = std::clamp(sketch.value_at_rank(nearest_rank_of(count, 50)), out.min, out.max);
      out.p95 = std::clamp(sketch.value_at_rank(nearest_rank_of(count, 95)), out.min, out.max);
      return out;
    }
  };
  // The self times (RegionTiming::self_ns) equal the durations for a region without children,
  // the common case (leaves): they get a series of their own only from the first sample where
  // they differ (a copy of the durations' series then, which held the same samples), so a leaf
  // costs one series update per report, not two.
  struct Series {
    Durations total;
    Durations self;  // meaningful once self_apart; before, the self times are `total`'s samples
    bool self_apart = false;
    uint64_t unmeasurable = 0;
    int depth = 0;
    std::string path;

    void add(const RegionTiming& region, StatsMode mode) {
      if (!region.measurable()) {
        ++unmeasurable;
        return;
      }
      const uint64_t v = region.duration_ns();
      if (!self_apart && (!region.self_measurable() || region.self_ns() != v)) {
        self = total;
        self_apart = true;
      }
      total.add(v, mode);
      if (self_apart && region.self_measurable()) self.add(region.self_ns(), mode);
    }
  };
  explicit State(StatsMode m) : mode(m) {}
  const StatsMode mode;
  mutable std::mutex mutex;
  std::vector<Series> series;                       // in first-seen order
  std::unordered_map<std::string, size_t> by_path;  // path -> index into series
  // The series of each layout's regions, so that the replays of one capture (one shared
  // layout) find theirs with one lookup instead of hashing every region's path on every report
  // (the hash lookups dominated at 1000 regions). The weak_ptr tells a layout from a later one
  // at the same address; entries of dead layouts are dropped as the map grows.
  struct LayoutSeries {
    std::weak_ptr<const ReportLayout> layout;
    std::vector<size_t> series;
  };
  std::unordered_map<const ReportLayout*, LayoutSeries> by_layout;
  size_t prune_at = 64;

  // Caller holds mutex.
  const std::vector<size_t>& series_of(const ReplayReport& report) {
    const std::shared_ptr<const ReportLayout>& layout = report.shared_layout();
    LayoutSeries& cached = by_layout[layout.get()];
    const bool same = !cached.layout.owner_before(layout) && !layout.owner_before(cached.layout) &&
                      !cached.layout.expired();
    if (!same || cached.series.size() != report.size()) {
      cached.layout = layout;
      cached.series.clear();
      for (const RegionInfo& region : layout->regions())
        cached.series.push_back(index_of(region.path, region.depth));
      if (by_layout.size() >= prune_at) prune();
    }
    return cached.series;
  }

  void prune() {
    for (auto it = by_layout.begin(); it != by_layout.end();)
      it = it->second.layout.expired() ? by_layout.erase(it) : std::next(it);
    prune_at = std::max<size_t>(64, by_layout.size() * 2);
  }

  // Caller holds mutex. A find before the emplace: the common case (a path seen before) then
  // allocates nothing.
  size_t index_of(const std::string& path, int depth) {
    auto found = by_path.find(path);
    if (found != by_path.end()) return found->second;
    by_path.emplace(path, series.size());
    Series fresh;
    fresh.path = path;
    fresh.depth = depth;
    series.push_back(std::move(fresh));
    return series.size() - 1;
  }
};

StatsAccumulator::StatsAccumulator(StatsMode mode) : state_(std::make_unique<State>(mode)) {}
StatsAccumulator::~StatsAccumulator() = default;

StatsMode StatsAccumulator::mode() const { return state_->mode; }

void StatsAccumulator::add(const ReplayReport& report) {
  State& state = *state_;
  std::lock_guard<std::mutex> lock(state.mutex);
  const std::vector<size_t>& series = state.series_of(report);
  size_t i = 0;
  for (const RegionTiming& region : report.regions())
    state.series[series[i++]].add(region, state.mode);
}

std::vector<size_t> StatsAccumulator::sketch_buckets() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<size_t> buckets;
  for (const State::Series& s : state_->series) buckets.push_back(s.total.sketch.counts.size());
  return buckets;
}

std::vector<RegionStats> StatsAccumulator::stats() const {
  // Copy under the lock; sort and walk outside it, so that delivery is not blocked for long.
  std::vector<State::Series> series;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    series = state_->series;
  }
  std::vector<RegionStats> result;
  result.reserve(series.size());
  for (State::Series& s : series) {
    RegionStats out;
    out.path = std::move(s.path);
    out.depth = s.depth;
    out.unmeasurable = s.unmeasurable;
    const State::Durations::Summary total = s.total.summarize(state_->mode);
    out.count = total.count;
    out.min_ns = total.min;
    out.mean_ns = total.mean;
    out.p50_ns = total.p50;
    out.p95_ns = total.p95;
    out.max_ns = total.max;
    const State::Durations::Summary self = s.self_apart ? s.self.summarize(state_->mode) : total;
    out.self_count = self.count;
    out.self_min_ns = self.min;
    out.self_mean_ns = self.mean;
    out.self_p50_ns = self.p50;
    out.self_p95_ns = self.p95;
    out.self_max_ns = self.max;
    result.push_back(std::move(out));
  }
  return result;
}

void StatsAccumulator::clear() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->series.clear();
  state_->by_path.clear();
  state_->by_layout.clear();
}

}  // namespace accgraph::timing
