// StatsAccumulator: per-region-path statistics over every report it is fed, in bounded memory
// (a quantile sketch per region, the default) or from every sample (StatsMode::Exact).
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "marker_transitions.hpp"
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
#if defined(__GNUC__) || defined(__clang__)
#define ACCGRAPH_STATS_NOINLINE __attribute__((noinline))
#else
#define ACCGRAPH_STATS_NOINLINE
#endif

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

  // The window then holds bucket `index`. Out of line: it is rare, and inlined into the fold's
  // loop its registers made the loop keep its running values on the stack.
  ACCGRAPH_STATS_NOINLINE void make_room(size_t index) {
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
    // Zeros only where no old count goes (a window's growth is most of a fold's cost until the
    // windows settle), and exactly new_end - new_low allocated, as before.
    std::vector<uint64_t> grown;
    grown.reserve(new_end - new_low);
    grown.resize(low - new_low);
    grown.insert(grown.end(), counts.begin(), counts.end());
    grown.resize(new_end - new_low);
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

// What every statistics thread did (detail::stats_thread_counters) and the test seam.
std::atomic<uint64_t> g_thread_cpu_ns{0}, g_thread_batches{0}, g_add_batches{0},
    g_inline_batches{0};
std::atomic<void (*)()> g_thread_hook{nullptr};

// This thread's CPU time in ns; 0 if the clock cannot be read (the figure is a diagnostic).
uint64_t thread_cpu_ns() {
  timespec now{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return 0;
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

// Note [Stats fold]
// add() is on the collection path of every replay, so it does little per region. Each layout gets a
// plan once (LayoutPlan): per region its series, its two marker indices and whether it has
// children, in one contiguous array. add() copies the report's marker times into the layout's stage
// (one memcpy) and asks the report for a self time only for a region with children (Note [Self
// time] in timing/model/report.cpp; a leaf's self time is its duration). When the stage holds
// kStageReplays replays (fewer for a large layout: kStageBytes), it is handed over (queued, Note
// [Stats thread]) and folded region by region: a leaf's durations in those replays, computed from
// the marker times as RegionTiming computes them (without making one), go into its series in the
// same loop (add_spans; a region with children goes through an array of its durations, beside its
// self times), so each series and its sketch are touched once per batch instead of once per report
// (at 1000 regions the bucket arrays fall out of cache between replays). A layout's first report is
// handed over at once (an eager region tree's layout may never come back); its stage grows at its
// second. What a plan staged is handed over before it is rebuilt or dropped, and everything handed
// over or staged is folded before stats() and sketch_buckets() read the series, so no sample is
// lost and no result changes: count, min, max, the sum, the sketch's counts and (Exact) the sorted
// samples do not depend on the order of the samples, and each series still sees its own samples in
// order (a sketch window grows as before). In the batch, kNotMeasured (kUnmeasurable, never a
// duration: that needs times 0 and kUnmeasurable, the unmeasurable marker time) means "not
// measurable" (for a self time: not self_measurable).
constexpr uint64_t kNotMeasured = kUnmeasurable;
constexpr size_t kStageReplays = 16;

// A leaf's duration from its begin and end marker times, or kNotMeasured: RegionTiming's rule.
using ::accgraph::detail::span_duration;
constexpr size_t kStageBytes = size_t{256} << 10;

// Note [Stats contexts]
// A series is kept per context and path: the replays of each graph (ReplayReport::graph_id)
// apart from those of every other graph and from the eager region trees (graph_id 0), so a
// graph replay's p50 is never mixed with an eager call's, nor two graphs' regions merged by
// path (a serving engine captures one graph per batch size, with the same module paths). With
// FirstEagerCall::Apart the first eager call of each path has a series of its own: the plan
// of an eager layout (every eager tree has its own) sends a region to its path's first-call
// series when that series does not exist yet, and such a plan is never reused for a later
// report of its layout (it is rebuilt, and then finds the first-call series made). Contexts
// are told apart by graph id; the names users read (a graph's capture site or label) are the
// integration's (accgraph.torch).

// Note [Stats thread]
// StatsFold::Background takes the fold (Note [Stats fold]) off the thread that calls add() (the
// profiler's collecting thread: the launching thread in make_room or flush). add() still stages; a
// full stage leaves its plan whole, as a Batch (the stage's buffers and the plan's PlanShape,
// immutable and shared: a plan may be rebuilt or pruned while its batch waits), for a queue that
// the accumulator's thread folds from the head; the plan takes a spare buffer. Locks: stage_mutex
// (plans, the path map, the queue, the spares) and series_mutex (the series), taken in the order
// series_mutex -> stage_mutex, never the reverse; add() takes only stage_mutex, so it never waits
// for a fold except when the queue is full, or while stats() or sketch_buckets() fold what is
// queued and staged (under both locks). Whoever folds takes batches from the head while holding
// series_mutex, and folds each before releasing it, so whoever holds series_mutex sees every sample
// folded or queued: stats(), sketch_buckets() and clear() take it (so they wait for the thread's
// current batch), then fold the queue and then the plans' stages, in the order StatsFold::Inline
// folds them (it queues and folds at once): every series sees its samples in the same order, and
// the results (the sketch windows included) are the same bit for bit. New series are made under
// stage_mutex (in `fresh`) and adopted into `series` when a batch is taken, since the thread reads
// `series` meanwhile. Memory: each plan's own stage; at most kMaxQueued batches queued, plus one
// per thread inside add() (a push past kMaxQueued makes its add() fold the queue itself, under
// series_mutex); one in the thread's hands; at most kMaxSpare spare buffers. Each is at most
// kStageBytes or one replay's marker and self times. A layout's first report is handed over at
// once, as in Note [Stats fold]. If the thread cannot start, or a fold on it throws (bad_alloc), a
// Warning is logged and the accumulator folds inline from then on (a batch whose fold threw is
// lost, as it is inline, where the exception reaches add()'s caller instead).
constexpr size_t kMaxQueued = 4;
constexpr size_t kMaxSpare = kMaxQueued + 2;

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

    // The measured values of `values[0..n)` (kNotMeasured skipped); returns how many were not.
    uint64_t add_batch(const uint64_t* values, size_t n, StatsMode mode) {
      uint64_t skipped = 0;
      if (mode == StatsMode::Exact) {
        for (size_t k = 0; k < n; ++k)
          values[k] == kNotMeasured ? ++skipped : (samples.push_back(values[k]), 0);
        return skipped;
      }
      Folding folding(*this);
      for (size_t k = 0; k < n; ++k)
        values[k] == kNotMeasured ? ++skipped : (folding.add(values[k]), 0);
      folding.finish(n - skipped);
      return skipped;
    }
    // The durations of one region that spans one marker transition (a leaf: Note [Marker
    // transitions] in report.cpp) in `n` staged replays, from its begin and end marker times
    // (`stride` apart), computed and added in one pass, no array between (Note [Stats fold]);
    // returns how many were not measurable.
    uint64_t add_spans(const uint64_t* begin, const uint64_t* end, size_t stride, size_t n,
                       uint64_t overhead, StatsMode mode) {
      uint64_t skipped = 0;
      if (mode == StatsMode::Exact) {
        for (size_t k = 0; k < n; ++k) {
          const uint64_t v = span_duration(begin[k * stride], end[k * stride], overhead);
          v == kNotMeasured ? ++skipped : (samples.push_back(v), 0);
        }
        return skipped;
      }
      Folding folding(*this);
      for (const uint64_t* last = begin + n * stride; begin != last;
           begin += stride, end += stride) {
        // span_duration(), unfolded: its result compared again cost 5 instructions a sample.
        const uint64_t start = *begin, later = std::max(start, *end);
        if (later == kNotMeasured) {
          ++skipped;
          continue;
        }
        const uint64_t duration = later - start;  // 0 when end < start
        folding.add(duration > overhead ? duration - overhead : 0);
      }
      folding.finish(n - skipped);
      return skipped;
    }
    // Sketch mode: a batch's running min, max, sum and window in locals (a store into the
    // counts could alias every member, so a loop on the members would reload them all after
    // each one), stored back by finish().
    struct Folding {
      Durations& into;
      uint64_t lo, hi, sum, carry = 0;
      size_t window_low, window_size;
      uint64_t* counts;

      explicit Folding(Durations& d)
          : into(d),
            lo(d.min),
            hi(d.max),
            sum(d.sum_low),
            window_low(d.sketch.low),
            window_size(d.sketch.counts.size()),
            counts(d.sketch.counts.data()) {}
      void add(uint64_t v) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
        carry += sum < v;
        const size_t index = bucket_of(v);
        if (index - window_low >= window_size) {  // also when index < low: it wraps
          into.sketch.make_room(index);
          window_low = into.sketch.low;
          window_size = into.sketch.counts.size();
          counts = into.sketch.counts.data();
        }
        ++counts[index - window_low];
      }
      void finish(uint64_t added) {
        into.min = lo;
        into.max = hi;
        into.sum_low = sum;
        into.sum_high += carry;
        into.count += added;
      }
    };

    // count, min, mean, p50, p95 and max, as RegionStats documents them.
    struct Summary {
      uint64_t count = 0;
      double min = 0, mean = 0, p50 = 0, p95 = 0, max = 0;
      double p05 = 0;
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
        out.p05 = static_cast<double>(sorted[nearest_rank_of(sorted.size(), 5) - 1]);
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
      out.p05 = std::clamp(sketch.value_at_rank(nearest_rank_of(count, 5)), out.min, out.max);
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
    uint64_t graph_id = 0;  // the context (Note [Stats contexts])
    bool first_call = false;

    // `n` durations of a leaf (its self times are its durations), kNotMeasured: unmeasurable.
    void add_leaf(const uint64_t* durations, size_t n, StatsMode mode) {
      unmeasurable += total.add_batch(durations, n, mode);
      if (self_apart) self.add_batch(durations, n, mode);
    }
    // `n` durations and self times of a region with children. Until a self time differs from
    // its duration, the self times are the durations' samples; from that one on, each series
    // takes its own.
    void add_parent(const uint64_t* durations, const uint64_t* selfs, size_t n, StatsMode mode) {
      size_t k = 0;
      if (!self_apart) {
        while (k < n && (durations[k] == kNotMeasured || selfs[k] == durations[k])) ++k;
        unmeasurable += total.add_batch(durations, k, mode);
        if (k == n) return;
        self = total;  // also when the self time is not measurable
        self_apart = true;
      }
      unmeasurable += total.add_batch(durations + k, n - k, mode);
      self.add_batch(selfs + k, n - k, mode);  // not measurable where the duration is not
    }
  };

  // One region of a layout, as fold() reads it (Note [Stats fold]).
  struct Slot {
    uint32_t series;       // index into State::series
    uint32_t begin, end;   // marker indices
    int32_t parent_rank;   // its row among the plan's regions with children; -1: a leaf
    uint32_t first, last;  // ReportLayout::first_position/last_position
    bool one_transition;   // spans one ordinary transition: span_duration() is its duration
  };
  // What a fold needs of a layout's plan. Immutable once made: the batches a plan handed over
  // share it, and may outlive the plan (Note [Stats thread]).
  struct PlanShape {
    std::vector<Slot> slots;
    std::vector<uint32_t> parents;         // the regions with children, by parent_rank
    size_t markers = 0;                    // the layout's marker_count()
    uint64_t overhead = 0;                 // its source's marker_overhead_ns
    uint64_t back_to_back = 0;             // its source's marker_back_to_back_ns
    std::vector<uint32_t> ordered;         // the layout's ordered_markers()
    std::vector<uint8_t> back_to_back_at;  // and back_to_back_at()
    bool first_eager = false;              // a slot went to a first eager call's series: not reused
  };
  // Staged replays. times[k * markers + m] is marker m's time in the k-th staged replay;
  // self_times[r * capacity + k] the self time there of the region whose parent_rank is r
  // (kNotMeasured: not self_measurable).
  // A stage's values, left uninitialised: stage_report() writes a replay's values before fold()
  // reads them (only the `staged` replays), so the zero fill a std::vector gives each new stage
  // (128 KiB at 1000 regions) was wasted work. Grows, never shrinks, like a vector's capacity.
  struct StageBuffer {
    std::unique_ptr<uint64_t[]> values;
    size_t size = 0;
    void fit(size_t count) {
      if (count <= size) return;
      values.reset(new uint64_t[count]);  // default-initialised: no fill
      size = count;
    }
    uint64_t* data() { return values.get(); }
    uint64_t& operator[](size_t i) { return values[i]; }
  };
  struct Stage {
    StageBuffer times, self_times;
    size_t capacity = 1;  // replays it holds: 1 until the layout's second report
    size_t staged = 0;
  };
  // A stage handed over for folding, with its plan's shape.
  struct Batch {
    std::shared_ptr<const PlanShape> shape;
    Stage stage;
  };
  // A layout's plan and stage.
  struct LayoutPlan {
    std::weak_ptr<const ReportLayout> layout;
    std::shared_ptr<const PlanShape> shape;
    Stage stage;
    int seen = 0;  // reports of the layout added, counted up to 2
  };

  State(StatsMode m, StatsFold f, FirstEagerCall first)
      : mode(m), fold_mode(f), first_eager_call(first), fold_inline(f == StatsFold::Inline) {}
  ~State() { stop_thread(); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  const StatsMode mode;
  const StatsFold fold_mode;
  const FirstEagerCall first_eager_call;
  // Lock order: series_mutex -> stage_mutex, never the reverse (Note [Stats thread]).
  // Under series_mutex: the series.
  mutable std::mutex series_mutex;
  std::vector<Series> series;  // in first-seen order
  // Under stage_mutex: the rest.
  mutable std::mutex stage_mutex;
  // (context, path) -> index into series (the key: context_key + path, Note [Stats contexts])
  std::unordered_map<std::string, size_t> by_path;
  std::vector<Series> fresh;  // series made since the last adopt(): series.size() + i
  size_t series_made = 0;     // series.size() + fresh.size()
  // The plan of each layout, so that the replays of one capture (one shared layout) find their
  // series with one lookup instead of hashing every region's path on every report (the hash
  // lookups dominated at 1000 regions). The weak_ptr tells a layout from a later one at the same
  // address; plans of dead layouts are handed over and dropped as the map grows.
  std::unordered_map<const ReportLayout*, LayoutPlan> by_layout;
  size_t prune_at = 64;
  std::deque<Batch> queue;   // handed over, in order; folded from the head
  std::vector<Stage> spare;  // the buffers of folded batches, for the next full stages
  bool fold_inline;          // StatsFold::Inline, or the thread could not start or failed
  bool stopping = false;     // the destructor runs
  std::condition_variable wake;
  std::thread thread;

  // Stages `report`: what it hands over is folded before this returns in Inline mode (and when
  // the thread is out), in Background mode only if the queue is full (Note [Stats thread]). One
  // lock (stage_mutex) when nothing is handed over. Caller holds no lock.
  void add(const ReplayReport& report) {
    std::optional<std::string> start_failure;
    {
      std::lock_guard<std::mutex> lock(stage_mutex);
      stage_report(report);
      if (queue.empty()) return;
      if (!fold_inline && queue.size() <= kMaxQueued) {
        start_failure = start_thread();
        if (!start_failure) {
          wake.notify_one();
          return;
        }
      }
    }
    // Logged outside the locks: a log handler may call back into the profiler.
    if (start_failure)
      log(LogLevel::Warning,
          fmt::format("timing: the statistics thread could not start ({}): the statistics are "
                      "folded on the delivering thread instead (ProfilerOptions::stats_thread "
                      "= false does so from the start)",
                      *start_failure));
    std::atomic<uint64_t>& counter =
        fold_mode == StatsFold::Inline ? g_inline_batches : g_add_batches;
    std::lock_guard<std::mutex> series_lock(series_mutex);
    while (fold_next()) counter.fetch_add(1, std::memory_order_relaxed);
  }

  // Copies the report's marker times (and its parents' self times) into its layout's stage,
  // handing a full stage over. Caller holds stage_mutex.
  void stage_report(const ReplayReport& report) {
    LayoutPlan& plan = plan_of(report);
    if (plan.seen < 2 && ++plan.seen == 2) grow_stage(plan);  // it came back: stage its replays
    const PlanShape& shape = *plan.shape;
    Stage& stage = plan.stage;
    const size_t k = stage.staged;
    std::copy_n(report.marker_times().data(), shape.markers,
                stage.times.data() + k * shape.markers);
    for (size_t r = 0; r < shape.parents.size(); ++r) {
      const RegionTiming timing = report.region(shape.parents[r]);
      stage.self_times[r * stage.capacity + k] =
          timing.self_measurable() ? timing.self_ns() : kNotMeasured;
    }
    if (++stage.staged < stage.capacity) return;
    const size_t capacity = stage.capacity;
    hand_over(plan);  // empties plan.stage (`stage`)
    plan.stage = spare_stage(shape, capacity);
  }

  // Queues what `plan` has staged, leaving its stage empty. Caller holds stage_mutex.
  void hand_over(LayoutPlan& plan) {
    if (plan.stage.staged == 0) return;
    queue.push_back(Batch{plan.shape, std::move(plan.stage)});
    plan.stage = Stage{};
  }

  // An empty stage of `capacity` replays of `shape`, in a spare buffer if there is one. Caller
  // holds stage_mutex.
  Stage spare_stage(const PlanShape& shape, size_t capacity) {
    Stage stage;
    if (!spare.empty()) {
      stage = std::move(spare.back());
      spare.pop_back();
    }
    stage.capacity = capacity;
    stage.staged = 0;
    stage.times.fit(shape.markers * capacity);
    stage.self_times.fit(shape.parents.size() * capacity);
    return stage;
  }

  // Keeps a folded batch's buffers for a later stage. Caller holds stage_mutex.
  void recycle(Stage&& stage) {
    if (spare.size() < kMaxSpare) spare.push_back(std::move(stage));
  }

  // Caller holds stage_mutex; nothing is staged.
  void grow_stage(LayoutPlan& plan) {
    const PlanShape& shape = *plan.shape;
    const size_t per_replay = std::max<size_t>(1, shape.markers + shape.parents.size());
    plan.stage = spare_stage(
        shape, std::clamp<size_t>(kStageBytes / sizeof(uint64_t) / per_replay, 1, kStageReplays));
  }

  // Moves the series made since into `series`. Caller holds both locks.
  void adopt() {
    if (fresh.empty()) return;
    series.insert(series.end(), std::make_move_iterator(fresh.begin()),
                  std::make_move_iterator(fresh.end()));
    fresh.clear();
  }

  // Folds the queue, in order, counting the batches in `counter`. Caller holds both locks.
  void fold_queue_locked(std::atomic<uint64_t>& counter) {
    adopt();
    while (!queue.empty()) {
      Batch& batch = queue.front();
      fold(*batch.shape, batch.stage);
      counter.fetch_add(1, std::memory_order_relaxed);
      recycle(std::move(batch.stage));
      queue.pop_front();
    }
  }

  // Folds the queue's head, if any (and not stopping); takes stage_mutex twice, not while
  // folding. Caller holds series_mutex.
  bool fold_next() {
    Batch batch;
    {
      std::lock_guard<std::mutex> lock(stage_mutex);
      if (queue.empty() || stopping) return false;
      adopt();
      batch = std::move(queue.front());
      queue.pop_front();
    }
    fold(*batch.shape, batch.stage);  // if it throws, the batch is lost (Note [Stats thread])
    std::lock_guard<std::mutex> lock(stage_mutex);
    recycle(std::move(batch.stage));
    return true;
  }

  // Folds everything handed over, then everything staged, in the order an Inline accumulator
  // folds them. Caller holds both locks.
  void fold_all_locked() {
    fold_queue_locked(fold_mode == StatsFold::Inline ? g_inline_batches : g_add_batches);
    for (auto& entry : by_layout) fold(*entry.second.shape, entry.second.stage);
  }

  // Folds `stage`, region by region (Note [Stats fold]). Caller holds series_mutex, and stage_mutex
  // if `stage` is a plan's. The stage is emptied first: if a series' update throws (out of memory),
  // the rest of the batch is lost, not folded twice.
  void fold(const PlanShape& shape, Stage& stage) {
    const size_t n = stage.staged;
    if (n == 0) return;
    stage.staged = 0;
    uint64_t durations[kStageReplays];
    const size_t stride = shape.markers;
    for (const Slot& slot : shape.slots) {
      Series& target = series[slot.series];
      const uint64_t* begin = stage.times.data() + slot.begin;
      const uint64_t* end = stage.times.data() + slot.end;
      if (slot.parent_rank < 0 && !target.self_apart && slot.one_transition) {  // the common case
        target.unmeasurable += target.total.add_spans(begin, end, stride, n, shape.overhead, mode);
        continue;
      }
      for (size_t k = 0; k < n; ++k) {
        const uint64_t b = begin[k * stride], e = end[k * stride];
        if (b == kNotMeasured || e == kNotMeasured)
          durations[k] = kNotMeasured;
        else if (shape.overhead == 0 && shape.back_to_back == 0)  // as RegionTiming: as read
          durations[k] = span_duration(b, e, 0);
        else
          durations[k] = timing::detail::work_ns(
              stage.times.data() + k * stride, shape.ordered.data(), shape.back_to_back_at.data(),
              slot.first, slot.last, shape.overhead, shape.back_to_back);
      }
      if (slot.parent_rank < 0)
        target.add_leaf(durations, n, mode);
      else
        target.add_parent(
            durations,
            stage.self_times.data() + static_cast<size_t>(slot.parent_rank) * stage.capacity, n,
            mode);
    }
  }

  // Caller holds stage_mutex.
  LayoutPlan& plan_of(const ReplayReport& report) {
    const std::shared_ptr<const ReportLayout>& layout = report.shared_layout();
    LayoutPlan& plan = by_layout[layout.get()];
    const bool same = !plan.layout.owner_before(layout) && !layout.owner_before(plan.layout) &&
                      !plan.layout.expired();
    if (same && plan.shape->slots.size() == report.size() && !plan.shape->first_eager) return plan;
    hand_over(plan);  // what an earlier layout at this address staged
    plan = LayoutPlan{};
    plan.layout = layout;
    auto shape = std::make_shared<PlanShape>();
    const std::vector<RegionInfo>& regions = layout->regions();
    std::vector<bool> has_children(regions.size(), false);
    for (const RegionInfo& region : regions)
      if (region.parent >= 0) has_children[static_cast<size_t>(region.parent)] = true;
    const uint64_t graph_id = report.graph_id();
    const bool first_apart = graph_id == 0 && first_eager_call == FirstEagerCall::Apart;
    for (size_t i = 0; i < regions.size(); ++i) {
      int32_t rank = -1;
      if (has_children[i]) {
        rank = static_cast<int32_t>(shape->parents.size());
        shape->parents.push_back(static_cast<uint32_t>(i));
      }
      // The first eager call of a path makes its first-call series; the calls after it find
      // it and go to the path's other eager series.
      bool first = false;
      if (first_apart) {
        const size_t made = series_made;
        index_of(graph_id, /*first_call=*/true, regions[i].path, regions[i].depth);
        first = series_made != made;
        shape->first_eager = shape->first_eager || first;
      }
      const size_t series_index =
          first ? series_made - 1
                : index_of(graph_id, /*first_call=*/false, regions[i].path, regions[i].depth);
      shape->slots.push_back(
          Slot{static_cast<uint32_t>(series_index), regions[i].begin_marker, regions[i].end_marker,
               rank, layout->first_position(i), layout->last_position(i),
               layout->marker_transitions(i) == 1 && layout->back_to_back_transitions(i) == 0});
    }
    shape->markers = layout->marker_count();
    shape->overhead = layout->source().marker_overhead_ns;
    shape->back_to_back = layout->source().marker_back_to_back_ns;
    shape->ordered = layout->ordered_markers();
    shape->back_to_back_at = layout->back_to_back_at();
    plan.shape = std::move(shape);
    plan.stage = spare_stage(*plan.shape, 1);
    if (by_layout.size() >= prune_at) prune(layout.get());
    return plan;
  }

  // Drops the plans of dead layouts (handing over what they staged), except `keep`'s. Caller
  // holds stage_mutex.
  void prune(const ReportLayout* keep) {
    for (auto it = by_layout.begin(); it != by_layout.end();) {
      if (it->first == keep || !it->second.layout.expired()) {
        ++it;
        continue;
      }
      hand_over(it->second);
      it = by_layout.erase(it);
    }
    prune_at = std::max<size_t>(64, by_layout.size() * 2);
  }

  // Caller holds stage_mutex. Runs once per region when a layout's plan is made (not per
  // report); a find before the emplace.
  size_t index_of(uint64_t graph_id, bool first_call, const std::string& path, int depth) {
    // The context as a prefix no path can make ambiguous: "<graph id>" or "<graph id>f", a
    // NUL, then the path.
    std::string key = std::to_string(graph_id);
    if (first_call) key += 'f';
    key += '\0';
    key += path;
    auto found = by_path.find(key);
    if (found != by_path.end()) return found->second;
    by_path.emplace(std::move(key), series_made);
    Series made;
    made.path = path;
    made.depth = depth;
    made.graph_id = graph_id;
    made.first_call = first_call;
    fresh.push_back(std::move(made));
    return series_made++;
  }

  // Forgets every series and everything staged or handed over. Caller holds both locks.
  void clear_locked() {
    series.clear();
    fresh.clear();
    series_made = 0;
    by_path.clear();
    by_layout.clear();
    for (Batch& batch : queue) recycle(std::move(batch.stage));
    queue.clear();
  }

  // Starts the thread unless it runs; if it cannot start, the accumulator folds inline from
  // then on and this returns why (for the caller to log once it released the lock). Caller
  // holds stage_mutex.
  std::optional<std::string> start_thread() {
    if (thread.joinable()) return std::nullopt;
    try {
      thread = std::thread([this] { run(); });
      return std::nullopt;
    } catch (const std::exception& e) {
      fold_inline = true;
      return std::string(e.what());
    }
  }

  // The statistics thread: folds the queue from its head whenever woken, until stopping.
  void run() {
    try {
      std::unique_lock<std::mutex> lock(stage_mutex);
      for (;;) {
        wake.wait(lock, [this] { return stopping || !queue.empty(); });
        if (stopping) return;
        lock.unlock();
        if (void (*hook)() = g_thread_hook.load()) hook();
        fold_queue_on_thread();
        lock.lock();
      }
    } catch (const std::exception& e) {
      thread_failed(e.what());
    } catch (...) {
      thread_failed("a non-standard exception");
    }
  }

  // The thread folds batch after batch, taking series_mutex for each, and counts its CPU time
  // (before the batch, so that whoever sees the batch counted sees its time too).
  void fold_queue_on_thread() {
    uint64_t cpu = thread_cpu_ns();
    for (;;) {
      std::lock_guard<std::mutex> series_lock(series_mutex);
      if (!fold_next()) return;
      const uint64_t now = thread_cpu_ns();
      if (cpu != 0 && now > cpu) g_thread_cpu_ns.fetch_add(now - cpu, std::memory_order_relaxed);
      cpu = now;
      g_thread_batches.fetch_add(1, std::memory_order_release);
    }
  }

  // The thread's fold threw: the add() calls to come fold inline.
  void thread_failed(const char* what) noexcept {
    {
      std::lock_guard<std::mutex> lock(stage_mutex);
      fold_inline = true;
    }
    log(LogLevel::Warning,
        fmt::format("timing: the statistics thread failed to fold a batch of replays ({}): "
                    "stats() misses some of their regions' samples; the statistics are folded "
                    "on the delivering thread from now on",
                    what));
  }

  void stop_thread() {
    {
      std::lock_guard<std::mutex> lock(stage_mutex);
      stopping = true;
    }
    wake.notify_all();
    if (thread.joinable()) thread.join();
  }
};

StatsAccumulator::StatsAccumulator(StatsMode mode)
    : state_(std::make_unique<State>(mode, StatsFold::Inline, FirstEagerCall::Pooled)) {}
StatsAccumulator::StatsAccumulator(StatsMode mode, StatsFold fold)
    : state_(std::make_unique<State>(mode, fold, FirstEagerCall::Pooled)) {}
StatsAccumulator::StatsAccumulator(StatsMode mode, StatsFold fold, FirstEagerCall first_eager_call)
    : state_(std::make_unique<State>(mode, fold, first_eager_call)) {}
StatsAccumulator::~StatsAccumulator() = default;

StatsMode StatsAccumulator::mode() const { return state_->mode; }

void StatsAccumulator::add(const ReplayReport& report) { state_->add(report); }

std::vector<size_t> StatsAccumulator::sketch_buckets() const {
  std::lock_guard<std::mutex> series_lock(state_->series_mutex);
  {
    std::lock_guard<std::mutex> stage_lock(state_->stage_mutex);
    state_->fold_all_locked();
  }
  std::vector<size_t> buckets;
  for (const State::Series& s : state_->series) buckets.push_back(s.total.sketch.counts.size());
  return buckets;
}

std::vector<RegionStats> StatsAccumulator::stats() const {
  // Copy under the lock; sort and walk outside it, so that delivery is not blocked for long.
  std::vector<State::Series> series;
  {
    std::lock_guard<std::mutex> series_lock(state_->series_mutex);
    {
      std::lock_guard<std::mutex> stage_lock(state_->stage_mutex);
      state_->fold_all_locked();
    }
    series = state_->series;
  }
  std::vector<RegionStats> result;
  result.reserve(series.size());
  for (State::Series& s : series) {
    RegionStats out;
    out.path = std::move(s.path);
    out.depth = s.depth;
    out.graph_id = s.graph_id;
    out.first_call = s.first_call;
    out.unmeasurable = s.unmeasurable;
    const State::Durations::Summary total = s.total.summarize(state_->mode);
    const State::Durations::Summary self = s.self_apart ? s.self.summarize(state_->mode) : total;
    total.assign_to(out.count, out.min_ns, out.mean_ns, out.p50_ns, out.p95_ns, out.max_ns);
    out.p05_ns = total.p05;
    self.assign_to(out.self_count, out.self_min_ns, out.self_mean_ns, out.self_p50_ns,
                   out.self_p95_ns, out.self_max_ns);
    result.push_back(std::move(out));
  }
  return result;
}

void StatsAccumulator::clear() {
  std::lock_guard<std::mutex> series_lock(state_->series_mutex);
  std::lock_guard<std::mutex> stage_lock(state_->stage_mutex);
  state_->clear_locked();
}

}  // namespace accgraph::timing

namespace accgraph::detail {

using timing::g_add_batches;
using timing::g_inline_batches;
using timing::g_thread_batches;
using timing::g_thread_cpu_ns;
using timing::g_thread_hook;

StatsThreadCounters stats_thread_counters() {
  StatsThreadCounters out;
  // The batch count first: its thread added the batch's CPU time before it (release).
  out.thread_batches = g_thread_batches.load(std::memory_order_acquire);
  out.cpu_ns = g_thread_cpu_ns.load(std::memory_order_relaxed);
  out.add_batches = g_add_batches.load(std::memory_order_relaxed);
  out.inline_batches = g_inline_batches.load(std::memory_order_relaxed);
  return out;
}

void set_stats_thread_hook(void (*hook)()) { g_thread_hook.store(hook); }

}  // namespace accgraph::detail
