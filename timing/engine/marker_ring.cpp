// MarkerRing (marker_ring.hpp).
#include "marker_ring.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/marker_kernels.hpp"
#include "timing_seam.hpp"

namespace accgraph::timing {

void RingLock::lock_slow() noexcept {  // Note [Ring lock]
  for (int attempt = 0;; ++attempt) {
    if (try_lock()) return;
    if (attempt < 64) continue;  // the holder is a launch: it gives the lock up within ~100 ns
    if (attempt < 128) {
      std::this_thread::yield();
      continue;
    }
    // The holder waits for the device (a collection): look again in growing steps.
    const int step = std::min(attempt - 127, 50);
    std::this_thread::sleep_for(std::chrono::microseconds(step));
  }
}

// Note [Launch fences]: a ForeignGraph's owner launches the graph itself (launch(s, fn)), and
// an owner that breaks the rule "fn enqueues exactly one execution" would otherwise hang or
// mislead the timing layer: a launch that runs nothing never publishes its sequence (a wait for
// it never returns: flush, reset and interpreter exit hung), a backend that copies its markers
// after each launch publishes the previous launch's times again, and a launch that runs twice
// (or runs, then raises) shifts the device's sequence numbering against the host's, so later
// reports carry other launches' times or are lost as "overwritten". So after each foreign launch
// of a graph with regions the ring enqueues a fence: an eager sequence of one marker on the
// launch stream, on a marker set of its own. The stream runs in order, so once the fence ran,
// whatever the launch enqueued has run too; and its time bounds that launch's markers from
// above, as the previous fence's time bounds them from below. Collection waits only for the
// fence (which always runs), never for the graph's sequence, then checks:
//   - the sequence did not complete, or its times lie outside the launch's window: the launch ran
//     no execution (rule broken: reported unmeasurable, with a warning);
//   - the next sequence also completed inside the window: it ran more than once (likewise);
//   - a launch that raised: nothing is reported, and its number is given to the next launch.
// When the numbering may be out of step, the next launch skips a sequence number: backends that
// pick slots on the device re-align their counter when a launch's number is not the one they
// expected (cuda's before_launch, SteadyClockMarkers), so later launches are reported again. A
// fence costs one eager marker sequence per launch; graphs without regions get none (their
// last launch is waited for, bounded, only when the ring is retired).
std::shared_ptr<MarkerRing> MarkerRing::create(Backend& backend, const std::string& backend_name,
                                               int device, uint64_t graph_id,
                                               const MarkerOptions& options, bool fenced,
                                               MarkerCosts costs) {
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(device, options);
  if (!markers)
    throw Error(ErrorCode::BackendError,
                fmt::format("create_markers returned no marker set for device {}: the backend "
                            "must return markers or throw",
                            device),
                backend_name);
  ReportSource source;
  source.backend = backend_name;
  source.device = device;
  for (const DeviceInfo& info : backend.devices())
    if (info.index == device) source.device_name = info.name;
  source.marker_strategy = markers->strategy();
  // Note [Marker kernel names] in spi/marker_kernels.hpp.
  if (const MarkerKernelNames* names = marker_kernel_names_of(*markers))
    source.marker_kernels = names->marker_kernels();
  source.resolution_ns = markers->resolution_ns();
  source.marker_overhead_ns = costs.transition_ns;
  source.marker_back_to_back_ns = costs.back_to_back_ns;
  auto ring = std::make_shared<MarkerRing>(std::move(markers), std::move(source), graph_id);
  if (fenced) {
    ring->backend_ = &backend;
    ring->fence_strategy_ = options.strategy;
  }
  return ring;
}

MarkerRing::~MarkerRing() = default;

MarkerRing::MarkerRing(std::unique_ptr<TimestampMarkers> markers, ReportSource source,
                       uint64_t graph_id)
    : markers_(std::move(markers)),
      source_(std::move(source)),
      graph_id_(graph_id),
      depth_(std::max<size_t>(1, markers_->ring_depth())) {}

void MarkerRing::begin_sequence(StreamImpl& stream) {
  std::lock_guard<RingLock> lock(mutex_);
  markers_->begin_sequence(stream);
}

void MarkerRing::record(StreamImpl& stream, uint32_t marker) {
  std::lock_guard<RingLock> lock(mutex_);
  markers_->record(stream, marker);
}

void MarkerRing::end_sequence(StreamImpl& stream) {
  std::lock_guard<RingLock> lock(mutex_);
  markers_->end_sequence(stream);
  if (!depth_final_) depth_ = std::max<size_t>(1, markers_->ring_depth());  // Note [Marker budget]
}

bool MarkerRing::full() const {
  std::lock_guard<RingLock> lock(mutex_);
  return full_locked();
}

bool MarkerRing::full_locked() const {
  // Before skipping a number (Note [Launch fences]) every pending sequence is collected: the
  // skip moves the slots later launches use, which must not be slots still unread.
  return pending_.size() >= depth_ || (out_of_step_ && !pending_.empty());
}

void MarkerRing::lock_contended(LaunchWaits* waits) {
  detail::LaunchWaitScope wait(waits);
  mutex_.lock();
}

bool MarkerRing::before_launch(GraphImplInterface& graph, StreamImpl& stream, bool needs_room,
                               LaunchWaits* waits) {
  if (!mutex_.try_lock()) lock_contended(waits);  // Note [Launch waits]
  std::lock_guard<RingLock> lock(mutex_, std::adopt_lock);
  if (needs_room && full_locked()) return false;
  if (out_of_step_) {  // Note [Launch fences]: a number the backend does not expect re-aligns it
    ++next_sequence_;
    out_of_step_ = false;
  }
  markers_->before_launch(graph, stream, next_sequence_);
  if (!depth_final_) {  // Note [Marker budget] in backend.hpp: sized by now, and for good
    depth_ = std::max<size_t>(1, markers_->ring_depth());
    depth_final_ = true;
    pending_.reserve(depth_);  // launches that run ahead allocate nothing (Note [Launch path])
  }
  return true;
}

void MarkerRing::after_launch(GraphImplInterface& graph, StreamImpl& stream,
                              const std::shared_ptr<const ReportLayout>& layout,
                              uint64_t replay_index, LaunchWaits* waits) {
  if (!mutex_.try_lock()) lock_contended(waits);  // Note [Launch waits]
  std::lock_guard<RingLock> lock(mutex_, std::adopt_lock);
  const uint64_t sequence = next_sequence_;
  markers_->after_launch(graph, stream, sequence);
  ++next_sequence_;
  if (replay_index == kNextReplay) replay_index = launches_;
  launches_ = replay_index + 1;
  last_launch_fenced_ = false;
  if (layout) pending_.push_back(Pending{sequence, replay_index, keep_layout(layout, sequence)});
}

// Note [Kept layouts]: every timed launch queues a pending entry naming its report's layout.
// A shared_ptr per entry cost the launching thread a reference count increment per launch (an
// atomic read-modify-write, out of Note [Launch path]'s <= 100 ns), and the collecting thread the
// matching decrement on the same cache line. The entry holds a plain pointer instead, and the ring
// keeps each distinct layout alive while an entry points at it: `layouts_` lists them in launch
// order with the last sequence launched with each, so a launch with the same layout as the one
// before (every replay of a graph, but its first after a change: the marker overhead measured at
// the first launch, eager trees) only updates that sequence. The report gets its counted reference
// at collection. A collection releases every kept layout whose last sequence is below every pending
// one (entries are collected in sequence order; a raised foreign launch's number is used again by
// the next launch, so not <=), except the newest: the next launch most likely uses it again (a
// graph holds it anyway).
const ReportLayout* MarkerRing::keep_layout(const std::shared_ptr<const ReportLayout>& layout,
                                            uint64_t sequence) {
  if (layouts_.empty() || layouts_.back().layout != layout)
    layouts_.push_back(KeptLayout{layout, sequence});
  else
    layouts_.back().last_sequence = sequence;
  return layout.get();
}

std::shared_ptr<const ReportLayout> MarkerRing::kept_layout(const Pending& pending) const {
  for (const KeptLayout& kept : layouts_)
    if (kept.layout.get() == pending.layout) return kept.layout;
  throw Error(ErrorCode::InvalidState,
              fmt::format("marker ring of graph {}: pending sequence {} names a report layout "
                          "the ring no longer keeps; this is an accgraph bug: please report it",
                          graph_id_, pending.sequence),
              source_.backend);
}

void MarkerRing::release_layouts() {
  // Below every pending sequence (or every launched one, with none pending): no entry names it.
  const uint64_t lowest = pending_.empty() ? next_sequence_ : pending_.front().sequence;
  size_t released = 0;
  while (released + 1 < layouts_.size() && layouts_[released].last_sequence < lowest) ++released;
  layouts_.erase(layouts_.begin(), layouts_.begin() + static_cast<std::ptrdiff_t>(released));
}

TimestampMarkers& MarkerRing::fence_for(StreamImpl& stream) {
  void* queue = stream.native_handle();
  for (Fence& fence : fences_)
    if (fence.queue == queue) return *fence.markers;
  MarkerOptions options;
  options.strategy = fence_strategy_;
  options.ring_depth = depth_;  // final: fences follow the graph's first launch
  std::unique_ptr<TimestampMarkers> markers = backend_->create_markers(source_.device, options);
  if (!markers)
    throw Error(ErrorCode::BackendError,
                fmt::format("create_markers returned no marker set for device {}: the backend "
                            "must return markers or throw",
                            source_.device),
                source_.backend);
  fences_.push_back(Fence{queue, std::move(markers), 0});
  return *fences_.back().markers;
}

void MarkerRing::after_foreign_launch(GraphImplInterface& graph, StreamImpl& stream,
                                      const std::shared_ptr<const ReportLayout>& layout,
                                      LaunchOutcome outcome, uint64_t replay_index,
                                      LaunchWaits* waits) {
  const bool raised = outcome == LaunchOutcome::Raised;
  if (replay_index != kNextReplay) launches_ = replay_index;
  if (!mutex_.try_lock()) lock_contended(waits);  // Note [Launch waits]
  std::lock_guard<RingLock> lock(mutex_, std::adopt_lock);
  const uint64_t sequence = next_sequence_;
  if (!raised) markers_->after_launch(graph, stream, sequence);
  if (!layout && raised) return;  // nothing to report and nothing to check
  if (!layout) {
    ++next_sequence_;
    ++launches_;
    last_launch_fenced_ = false;
    return;
  }
  // The fence, right behind whatever the owner's launch enqueued (Note [Launch fences]).
  TimestampMarkers& fence = fence_for(stream);
  Fence& entry = *std::find_if(fences_.begin(), fences_.end(),
                               [&](const Fence& f) { return f.markers.get() == &fence; });
  fence.begin_sequence(stream);
  fence.record(stream, 0);
  fence.end_sequence(stream);
  const uint64_t fence_sequence = entry.next++;
  fence.after_eager_sequence(stream, fence_sequence);
  Pending pending{sequence, launches_,      keep_layout(layout, sequence),
                  &fence,   fence_sequence, raised};
  if (!raised) {  // a raised launch counts no execution: its number is used again
    ++next_sequence_;
    ++launches_;
    last_launch_fenced_ = true;
  }
  pending_.push_back(std::move(pending));
}

void MarkerRing::close_eager_sequence(StreamImpl& stream,
                                      const std::shared_ptr<const ReportLayout>& layout) {
  std::lock_guard<RingLock> lock(mutex_);
  const uint64_t sequence = next_sequence_++;
  markers_->end_sequence(stream);
  markers_->after_eager_sequence(stream, sequence);
  const uint64_t index = launches_++;
  if (layout) pending_.push_back(Pending{sequence, index, keep_layout(layout, sequence)});
}

std::optional<MarkerRing::Pending> MarkerRing::oldest() const {
  std::lock_guard<RingLock> lock(mutex_);
  if (pending_.empty()) return std::nullopt;
  return pending_.front();
}

bool MarkerRing::oldest_complete() {
  std::lock_guard<RingLock> lock(mutex_);
  if (pending_.empty()) return false;
  const Pending& oldest = pending_.front();
  if (oldest.fence != nullptr) return oldest.fence->is_complete(oldest.fence_sequence);
  return markers_->is_complete(oldest.sequence);
}

uint64_t MarkerRing::queued() const {
  std::lock_guard<RingLock> lock(mutex_);
  return pending_.pushed();
}

MarkerRing::Collected MarkerRing::collect_next(uint64_t before) {
  std::lock_guard<RingLock> lock(mutex_);
  if (pending_.empty() || pending_.popped() >= before) return {};
  // Popped only once read (or failed): until then its slot must not be reused by a new launch,
  // which `full()` guarantees.
  Pending pending = std::move(pending_.front());
  std::exception_ptr failure;
  std::optional<ReplayReport> report;
  try {
    if (pending.fence != nullptr) {
      report = collect_fenced(pending);
    } else {
      std::vector<uint64_t> times = std::move(recycled_times_);  // Note [Recycled times]
      times.resize(pending.layout->marker_count());
      markers_->wait(pending.sequence);
      markers_->read(pending.sequence, times.data(), times.size());
      report.emplace(kept_layout(pending), graph_id_, pending.replay_index, std::move(times));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  pending_.pop_front();
  release_layouts();
  if (failure) std::rethrow_exception(failure);
  return {true, std::move(report)};
}

// Note [Recycled times]
// A report's marker times are read straight into the vector the report then owns (zero-copy:
// sinks see read()'s storage). Made anew for each collection, that vector of marker_count()
// zeros cost a fill on every replay (8 instructions a region under callgrind, the most of the
// collection path), which read() overwrites. The collector gives the vector of a report that
// nobody kept (delivered and not kept: sinks only borrow it) back to its ring, and the next
// collection resizes that one: same size, no fill; its old values are all overwritten, since
// read() writes every one of the `count` times or throws (and then no report is made).
void MarkerRing::recycle_times(std::vector<uint64_t> times) {
  std::lock_guard<RingLock> lock(mutex_);
  recycled_times_ = std::move(times);
}

bool MarkerRing::within(const std::vector<uint64_t>& times, uint64_t low, uint64_t high) {
  for (uint64_t t : times)
    if (t != TimestampMarkers::kUnmeasurable && (t == 0 || t < low || t > high)) return false;
  return true;
}

std::optional<std::vector<uint64_t>> MarkerRing::read_if_complete(uint64_t sequence, size_t count) {
  try {
    if (!markers_->is_complete(sequence)) return std::nullopt;
    std::vector<uint64_t> times(count);
    markers_->read(sequence, times.data(), times.size());
    return times;
  } catch (const Error&) {
    return std::nullopt;  // overwritten by a later sequence: not this launch's times
  }
}

std::optional<ReplayReport> MarkerRing::collect_fenced(Pending& pending) {
  uint64_t fence_ns = 0;
  pending.fence->wait(pending.fence_sequence);  // always runs: it is ours, behind the launch
  pending.fence->read(pending.fence_sequence, &fence_ns, 1);
  // The previous fence bounds this launch from below only on the same queue (launches on two
  // queues are ordered by the graph, fences are not).
  const uint64_t low = previous_fence_ == pending.fence ? previous_fence_ns_ : 0;
  previous_fence_ = pending.fence;
  previous_fence_ns_ = fence_ns == TimestampMarkers::kUnmeasurable ? 0 : fence_ns;
  const uint64_t high = fence_ns;
  // A launch that raised is not reported. If it ran, the device used the number the host gives
  // the next launch too; that launch's before_launch re-aligns the backend's counter, since it
  // gets the number again (cuda, SteadyClockMarkers), so the numbering stays in step.
  if (pending.raised) return std::nullopt;
  const size_t count = pending.layout->marker_count();
  std::optional<std::vector<uint64_t>> times = read_if_complete(pending.sequence, count);
  const bool ran = times && within(*times, low, high);
  std::string broken;
  if (!ran) {
    broken = "ran no execution of the graph";
  } else {
    // A second execution ran before the fence: its markers lie inside the window, after the
    // first execution's (a backend that copies its markers after each launch shows a launch of
    // nothing as the same times again), and its first one strictly before the fence (a later
    // launch's may equal the fence's time at coarse resolution).
    std::optional<std::vector<uint64_t>> next = read_if_complete(pending.sequence + 1, count);
    if (next && !next->empty() && !times->empty() && within(*next, low, high) &&
        next->front() >= times->back() && next->front() < high)
      broken = "ran the graph more than once";
  }
  if (broken.empty())
    return ReplayReport(kept_layout(pending), graph_id_, pending.replay_index, std::move(*times));
  out_of_step_ = true;
  if (!warned_) {
    warned_ = true;
    log(LogLevel::Warning,
        fmt::format("timing: foreign graph {}: launch {} {}: ForeignGraph::launch(stream, fn) "
                    "needs `fn` to enqueue exactly one execution of the captured graph on that "
                    "stream; its report is unmeasurable (and so is any other launch that breaks "
                    "the rule; this warning is given once per capture)",
                    graph_id_, pending.replay_index, broken));
  }
  return ReplayReport(kept_layout(pending), graph_id_, pending.replay_index,
                      std::vector<uint64_t>(count, TimestampMarkers::kUnmeasurable));
}

void MarkerRing::wait_last_launch() {
  std::lock_guard<RingLock> lock(mutex_);
  if (next_sequence_ == 0) return;
  if (backend_ == nullptr) {
    markers_->wait(next_sequence_ - 1);
    return;
  }
  // A foreign graph: its owner's last launch may have run nothing, so its sequence may never
  // complete (Note [Launch fences]). Fences complete; the graph's own last sequence is waited
  // for a bounded time, and if it does not complete the marker storage is kept for the process's
  // life rather than freed under work that might still write it.
  for (Fence& fence : fences_)
    if (fence.next > 0) fence.markers->wait(fence.next - 1);
  // Behind its fence, a launch that ran has completed: no need to wait any longer. An unfenced
  // last launch (no regions, or LaunchCheck::Trusted) gets a bounded wait.
  const auto deadline = std::chrono::steady_clock::now() +
                        (last_launch_fenced_ ? std::chrono::seconds(0) : std::chrono::seconds(10));
  while (!markers_->is_complete(next_sequence_ - 1)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      log(LogLevel::Warning,
          fmt::format("timing: foreign graph {}: its last launch has not completed (the owner's "
                      "launch may have run nothing); its marker storage is kept until the "
                      "process ends",
                      graph_id_));
      static std::mutex kept_mutex;
      static auto* kept = new std::vector<std::unique_ptr<TimestampMarkers>>();
      std::lock_guard<std::mutex> keep(kept_mutex);
      kept->push_back(std::move(markers_));
      markers_ = nullptr;
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace accgraph::timing
