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

// Without a branch: below kExactBelow, v | (kExactBelow - 1) is 127 and the shift 0, so the
// bucket is v itself; above, the low bits do not change the highest one.
size_t bucket_of(uint64_t v) {
  const int shift = highest_bit(v | (kExactBelow - 1)) - kSubBucketBits;  // 0, or 1 .. 57
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
    if (index - low >= counts.size()) make_room(index);  // also when index < low: it wraps
    ++counts[index - low];
  }

  // The window then holds bucket `index`.
  void make_room(size_t index) {
    if (counts.empty()) {
      low = index;
      counts.assign(1, 0);
    } else {
      grow_to(index);
    }
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

// Note [Stats fold]
// add() is on the collection path of every replay, so it does little per region. Each layout
// gets a plan once (LayoutPlan): per region its series, its two marker indices and whether it
// has children, in one contiguous array. add() copies the report's marker times into the
// layout's stage (one memcpy) and asks the report for a self time only for a region with
// children (Note [Self time] in timing/report.cpp; a leaf's self time is its duration). When
// the stage holds kStageReplays replays (fewer for a large layout: kStageBytes), it is folded
// region by region: the region's durations in those replays, computed from the marker times as
// RegionTiming computes them (without making one), then one tight loop over them into its
// series, so each series and its sketch are touched once per batch instead of once per report
// (at 1000 regions the bucket arrays fall out of cache between replays). A layout's first report
// is folded at once (an eager region tree's layout may never come back); its stage grows at its
// second. Everything staged is folded before stats() and sketch_buckets() read the series, and
// before a plan is rebuilt or dropped, so no sample is lost and no result changes: count, min,
// max, the sum, the sketch's counts and (Exact) the sorted samples do not depend on the order
// of the samples, and each series still sees its own samples in order (a sketch window grows as
// before). In the batch, kNotMeasured (UINT64_MAX, never a duration: that needs times 0 and
// UINT64_MAX, the unmeasurable marker time) means "not measurable" (for a self time: not
// self_measurable).
constexpr uint64_t kNotMeasured = UINT64_MAX;
constexpr size_t kStageReplays = 16;
constexpr size_t kStageBytes = size_t{256} << 10;

// Exact: every sample is kept (8 bytes per region per report, and as much for its self time) and
// p50/p95 are exact, by nearest rank. Sketch: count, min, max and a 128-bit integer sum are exact,
// p50/p95 come from the sketch (Note [Stats sketch]); at most kSketchMaxBuckets counts per region
// and as many for its self times.
struct StatsAccumulator::State {
  // One series of durations (a region's, or its self times').
  struct Durations {
    uint64_t count = 0;
    uint64_t min = UINT64_MAX, max = 0;  // meaningful once count != 0
    uint64_t sum_low = 0, sum_high = 0;  // the exact sum, sum_high * 2^64 + sum_low
    Sketch sketch;
    std::vector<uint64_t> samples;  // StatsMode::Exact

    void add(uint64_t v, StatsMode mode) { add_batch(&v, 1, mode); }
    // The measured values of `values[0..n)` (kNotMeasured skipped); returns how many were not.
    uint64_t add_batch(const uint64_t* values, size_t n, StatsMode mode) {
      uint64_t skipped = 0;
      if (mode == StatsMode::Exact) {
        for (size_t k = 0; k < n; ++k)
          values[k] == kNotMeasured ? ++skipped : (samples.push_back(values[k]), 0);
        return skipped;
      }
      // In locals: a store into the counts could alias every member, so the loop would reload
      // them all after each one.
      uint64_t lo = min, hi = max, sum = sum_low, carry = 0;
      size_t window_low = sketch.low, window_size = sketch.counts.size();
      uint64_t* counts = sketch.counts.data();
      for (size_t k = 0; k < n; ++k) {
        const uint64_t v = values[k];
        if (v == kNotMeasured) {
          ++skipped;
          continue;
        }
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
        carry += sum < v;
        const size_t index = bucket_of(v);
        if (index - window_low >= window_size) {  // also when index < low: it wraps
          sketch.make_room(index);
          window_low = sketch.low;
          window_size = sketch.counts.size();
          counts = sketch.counts.data();
        }
        ++counts[index - window_low];
      }
      min = lo;
      max = hi;
      sum_low = sum;
      sum_high += carry;
      count += n - skipped;
      return skipped;
    }

    // count, min, mean, p50, p95 and max, as RegionStats documents them.
    struct Summary {
      uint64_t count = 0;
      double min = 0, mean = 0, p50 = 0, p95 = 0, max = 0;
      // Into RegionStats' fields for the durations or for the self times.
      void assign_to(uint64_t& out_count, double& out_min, double& out_mean, double& out_p50,
                     double& out_p95, double& out_max) const {
        out_count = count;
        out_min = min;
        out_mean = mean;
        out_p50 = p50;
        out_p95 = p95;
        out_max = max;
      }
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
  // costs one series update per sample, not two.
  struct Series {
    Durations total;
    Durations self;  // meaningful once self_apart; before, the self times are `total`'s samples
    bool self_apart = false;
    uint64_t unmeasurable = 0;
    int depth = 0;
    std::string path;

    // `n` durations of a leaf (its self times are its durations), kNotMeasured: unmeasurable.
    void add_leaf(const uint64_t* durations, size_t n, StatsMode mode) {
      unmeasurable += total.add_batch(durations, n, mode);
      if (self_apart) self.add_batch(durations, n, mode);
    }
    // `n` durations and self times of a region with children.
    void add_parent(const uint64_t* durations, const uint64_t* selfs, size_t n, StatsMode mode) {
      for (size_t k = 0; k < n; ++k) {
        const uint64_t v = durations[k];
        if (v == kNotMeasured) {
          ++unmeasurable;
          continue;
        }
        if (!self_apart && selfs[k] != v) {  // also when the self time is not measurable
          self = total;
          self_apart = true;
        }
        total.add(v, mode);
        if (self_apart && selfs[k] != kNotMeasured) self.add(selfs[k], mode);
      }
    }
  };

  // One region of a layout, as fold() reads it (Note [Stats fold]).
  struct Slot {
    uint32_t series;      // index into State::series
    uint32_t begin, end;  // marker indices
    int32_t parent_rank;  // its row among the plan's regions with children; -1: a leaf
  };
  // A layout's plan and stage. times[k * markers + m] is marker m's time in the k-th staged
  // replay; self_times[r * capacity + k] the self time there of the region whose parent_rank
  // is r (kNotMeasured: not self_measurable).
  struct LayoutPlan {
    std::weak_ptr<const ReportLayout> layout;
    std::vector<Slot> slots;
    std::vector<uint32_t> parents;  // the regions with children, by parent_rank
    size_t markers = 0;             // the layout's marker_count()
    uint64_t overhead = 0;          // its source's marker_overhead_ns
    std::vector<uint64_t> times, self_times;
    size_t capacity = 1;  // replays the stage holds: 1 until the layout's second report
    size_t staged = 0;
    int seen = 0;  // reports of the layout added, counted up to 2
  };

  explicit State(StatsMode m) : mode(m) {}
  const StatsMode mode;
  mutable std::mutex mutex;
  std::vector<Series> series;                       // in first-seen order
  std::unordered_map<std::string, size_t> by_path;  // path -> index into series
  // The plan of each layout, so that the replays of one capture (one shared layout) find their
  // series with one lookup instead of hashing every region's path on every report (the hash
  // lookups dominated at 1000 regions). The weak_ptr tells a layout from a later one at the same
  // address; plans of dead layouts are folded and dropped as the map grows.
  std::unordered_map<const ReportLayout*, LayoutPlan> by_layout;
  size_t prune_at = 64;

  // Caller holds mutex.
  void add(const ReplayReport& report) {
    LayoutPlan& plan = plan_of(report);
    if (plan.seen < 2 && ++plan.seen == 2) grow_stage(plan);  // it came back: stage its replays
    const size_t k = plan.staged;
    std::copy_n(report.marker_times().data(), plan.markers, plan.times.data() + k * plan.markers);
    for (size_t r = 0; r < plan.parents.size(); ++r) {
      const RegionTiming timing = report.region(plan.parents[r]);
      plan.self_times[r * plan.capacity + k] =
          timing.self_measurable() ? timing.self_ns() : kNotMeasured;
    }
    if (++plan.staged == plan.capacity) fold(plan);
  }

  // Folds what `plan` has staged, region by region: its durations (as RegionTiming computes
  // them) in the staged replays, then its series' update over them. Caller holds mutex.
  void fold(LayoutPlan& plan) {
    const size_t n = plan.staged;
    if (n == 0) return;
    uint64_t durations[kStageReplays];
    const size_t stride = plan.markers;
    for (const Slot& slot : plan.slots) {
      const uint64_t* begin = plan.times.data() + slot.begin;
      const uint64_t* end = plan.times.data() + slot.end;
      for (size_t k = 0; k < n; ++k) {
        const uint64_t b = begin[k * stride], e = end[k * stride];
        uint64_t duration = std::max(b, e) - b;                   // 0 when end < start
        if (duration > plan.overhead) duration -= plan.overhead;  // Note [Marker overhead]
        const bool unmeasured = (b == kNotMeasured) | (e == kNotMeasured);
        durations[k] = unmeasured ? kNotMeasured : duration;
      }
      if (slot.parent_rank < 0)
        series[slot.series].add_leaf(durations, n, mode);
      else
        series[slot.series].add_parent(
            durations,
            plan.self_times.data() + static_cast<size_t>(slot.parent_rank) * plan.capacity, n,
            mode);
    }
    plan.staged = 0;
  }

  // Caller holds mutex; nothing is staged.
  void grow_stage(LayoutPlan& plan) {
    const size_t per_replay = std::max<size_t>(1, plan.markers + plan.parents.size());
    plan.capacity =
        std::clamp<size_t>(kStageBytes / sizeof(uint64_t) / per_replay, 1, kStageReplays);
    plan.times.assign(plan.markers * plan.capacity, 0);
    plan.self_times.assign(plan.parents.size() * plan.capacity, 0);
  }

  // Caller holds mutex.
  void fold_all() {
    for (auto& entry : by_layout) fold(entry.second);
  }

  // Caller holds mutex.
  LayoutPlan& plan_of(const ReplayReport& report) {
    const std::shared_ptr<const ReportLayout>& layout = report.shared_layout();
    LayoutPlan& plan = by_layout[layout.get()];
    const bool same = !plan.layout.owner_before(layout) && !layout.owner_before(plan.layout) &&
                      !plan.layout.expired();
    if (same && plan.slots.size() == report.size()) return plan;
    fold(plan);  // what an earlier layout at this address staged
    plan = LayoutPlan{};
    plan.layout = layout;
    const std::vector<RegionInfo>& regions = layout->regions();
    std::vector<bool> has_children(regions.size(), false);
    for (const RegionInfo& region : regions)
      if (region.parent >= 0) has_children[static_cast<size_t>(region.parent)] = true;
    for (size_t i = 0; i < regions.size(); ++i) {
      int32_t rank = -1;
      if (has_children[i]) {
        rank = static_cast<int32_t>(plan.parents.size());
        plan.parents.push_back(static_cast<uint32_t>(i));
      }
      plan.slots.push_back(Slot{static_cast<uint32_t>(index_of(regions[i].path, regions[i].depth)),
                                regions[i].begin_marker, regions[i].end_marker, rank});
    }
    plan.markers = layout->marker_count();
    plan.overhead = layout->source().marker_overhead_ns;
    plan.times.assign(plan.markers, 0);
    plan.self_times.assign(plan.parents.size(), 0);
    if (by_layout.size() >= prune_at) prune(layout.get());
    return plan;
  }

  // Drops the plans of dead layouts (folding what they staged), except `keep`'s.
  void prune(const ReportLayout* keep) {
    for (auto it = by_layout.begin(); it != by_layout.end();) {
      if (it->first == keep || !it->second.layout.expired()) {
        ++it;
        continue;
      }
      fold(it->second);
      it = by_layout.erase(it);
    }
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
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->add(report);
}

std::vector<size_t> StatsAccumulator::sketch_buckets() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->fold_all();
  std::vector<size_t> buckets;
  for (const State::Series& s : state_->series) buckets.push_back(s.total.sketch.counts.size());
  return buckets;
}

std::vector<RegionStats> StatsAccumulator::stats() const {
  // Copy under the lock; sort and walk outside it, so that delivery is not blocked for long.
  std::vector<State::Series> series;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->fold_all();
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
    const State::Durations::Summary self = s.self_apart ? s.self.summarize(state_->mode) : total;
    total.assign_to(out.count, out.min_ns, out.mean_ns, out.p50_ns, out.p95_ns, out.max_ns);
    self.assign_to(out.self_count, out.self_min_ns, out.self_mean_ns, out.self_p50_ns,
                   out.self_p95_ns, out.self_max_ns);
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
