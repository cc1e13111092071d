// RegionRecorder (region_recorder.hpp).
#include "region_recorder.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "timing_seam.hpp"

namespace accgraph::timing {

namespace {
std::string describe(const char* operation, const std::string& name) {
  return name.empty() ? std::string(operation) : fmt::format("{}('{}')", operation, name);
}
}  // namespace

const std::string& RegionRecorder::path_of(const OpenRegion& open) {
  return open.recording->regions[open.index].path;
}

const std::string* RegionRecorder::open_region_path(const StreamEntry& entry, uint64_t serial) {
  for (const OpenRegion& r : entry.stack)
    if (r.serial == serial) return &path_of(r);
  return nullptr;
}

// --- captures ----------------------------------------------------------------------------------

std::shared_ptr<Recording> RegionRecorder::begin_capture(Stream& stream, uint64_t graph_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream.id());
  if (it != streams_.end() && !it->second.stack.empty())
    throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
                fmt::format("capture_begin: region '{}' is open eagerly on stream {}: end it "
                            "before graph {} begins capturing on that stream",
                            path_of(it->second.stack.back()), stream.id(), graph_id),
                stream.backend_name());
  return std::make_shared<Recording>();
}

bool RegionRecorder::begin_sequence(const std::shared_ptr<Recording>& capture,
                                    const std::shared_ptr<MarkerRing>& ring, Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture->closed)
    throw Error(ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                fmt::format("the capture on stream {} ended while a region began or a stream "
                            "forked from it: begin regions and fork streams between capture_begin "
                            "and capture_end",
                            stream.id()),
                stream.backend_name());
  if (capture->ring) return false;
  // Before every marker of the capture, on every branch (Note [Marker ring]): the caller calls
  // this before the capture's first record() and before its first fork.
  ring->begin_sequence(detail::StreamAccess::impl(stream));
  capture->ring = ring;
  return true;
}

std::shared_ptr<const ReportLayout> RegionRecorder::end_capture(
    const std::shared_ptr<Recording>& capture, Stream& stream, uint64_t graph_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture->open_regions > 0) {
    std::string open;
    for (const auto& [stream_id, entry] : streams_)
      for (const OpenRegion& r : entry.stack)
        if (r.recording == capture)
          open +=
              fmt::format("{}'{}' on stream {}", open.empty() ? "" : ", ", path_of(r), stream_id);
    throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
                fmt::format("capture_end: region {} of graph {} is still open: end every region "
                            "before capture_end (the capture was aborted and the graph reset)",
                            open, graph_id),
                stream.backend_name());
  }
  forget(capture);
  if (!capture->ring) return nullptr;  // no region, no fork: nothing was enqueued for it
  capture->ring->end_sequence(detail::StreamAccess::impl(stream));
  return std::make_shared<const ReportLayout>(capture->ring->source(), kept_regions(*capture),
                                              std::move(capture->back_to_back));
}

std::vector<RegionInfo> RegionRecorder::kept_regions(Recording& recording) {
  if (recording.dropped.empty()) return std::move(recording.regions);
  std::vector<bool> dropped(recording.regions.size(), false);
  for (size_t index : recording.dropped) dropped[index] = true;
  std::vector<RegionInfo> kept;
  kept.reserve(recording.regions.size() - recording.dropped.size());
  // Where each region went: its index in `kept`, or for a dropped one its nearest kept
  // ancestor's (-1: none), which its children take as their parent. Parents come first.
  std::vector<int> moved_to(recording.regions.size(), -1);
  for (size_t i = 0; i < recording.regions.size(); ++i) {
    RegionInfo& info = recording.regions[i];
    const int parent = info.parent < 0 ? -1 : moved_to[static_cast<size_t>(info.parent)];
    if (dropped[i]) {
      moved_to[i] = parent;
      continue;
    }
    info.parent = parent;
    if (parent < 0) {
      info.depth = 0;
      info.path = info.name;
    } else {
      const RegionInfo& enclosing = kept[static_cast<size_t>(parent)];
      info.depth = enclosing.depth + 1;
      info.path = enclosing.path + "/" + info.name;
    }
    moved_to[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(info));
  }
  return kept;
}

void RegionRecorder::abandon_capture(const std::shared_ptr<Recording>& capture) {
  std::lock_guard<std::mutex> lock(mutex_);
  forget(capture);
}

void RegionRecorder::forget(const std::shared_ptr<Recording>& recording) {
  recording->closed = true;
  for (auto& [id, entry] : streams_) {
    auto& stack = entry.stack;
    const auto kept = std::remove_if(stack.begin(), stack.end(),
                                     [&](const OpenRegion& r) { return r.recording == recording; });
    entry.abandoned += static_cast<size_t>(stack.end() - kept);
    stack.erase(kept, stack.end());
    if (entry.last_marker && entry.last_marker->recording == recording) entry.last_marker.reset();
  }
}

// --- regions -----------------------------------------------------------------------------------

std::shared_ptr<MarkerRing> RegionRecorder::eager_ring(uint64_t stream_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second.eager_ring;
}

bool RegionRecorder::adopt_eager_ring(Stream& stream, std::shared_ptr<MarkerRing> ring) {
  std::lock_guard<std::mutex> lock(mutex_);
  StreamEntry& entry = streams_[stream.id()];
  if (entry.eager_ring) return false;
  entry.eager_ring = std::move(ring);
  return true;
}

// Note [Recording never delivers]: the outermost eager region starts a new marker sequence on
// the stream's eager ring, which has a free slot: the profiler made room in it when the previous
// tree closed (or collected it, Delivery::Immediate), so opening a region never waits for the
// device nor runs a sink. Caller holds mutex_.
std::shared_ptr<Recording> RegionRecorder::start_eager_tree(Stream& stream, StreamEntry& entry) {
  const std::shared_ptr<MarkerRing>& ring = entry.eager_ring;
  if (!ring)
    throw Error(ErrorCode::InvalidState,
                fmt::format("begin: stream {} has no eager marker ring (internal: the profiler "
                            "gives it one before its first eager region)",
                            stream.id()),
                stream.backend_name());
  // Full between the close of the last tree and the room its closer makes next, outside this
  // lock (another thread begins in between, which must not read as a false "collecting its
  // reports failed earlier" here), or after a collection that failed as the last tree closed.
  // The profiler makes room (or raises that collection's error) and begins again.
  if (ring->full()) throw EagerRingFull{ring};
  auto tree = std::make_shared<Recording>();
  tree->ring = ring;
  tree->eager = true;
  ring->begin_sequence(detail::StreamAccess::impl(stream));
  entry.eager_tree = tree;
  return tree;
}

// Note [Boundary sharing]: a region boundary (a begin or an end) reuses the last marker recorded
// on its stream in the same recording (capture or eager tree) when nothing was enqueued on the
// stream since that marker, since the two would then record the same instant. So adjacent
// siblings share one (the end of one is the begin of the next), a region and its first child
// share their begin, its last child and it share their end: a parent with two children and
// nothing between them needs 3 markers, not 6. A region's end never reuses its own begin
// marker: an empty region keeps two markers (its duration is measured, not assumed 0).
// "Nothing was enqueued" must be exact, or work would vanish between two regions:
// - accgraph's operation count of the stream is unchanged (StreamState::operations: every copy,
//   fill, host_call, delay, wait and timed replay counts; markers do not), and
// - on a native stream (Note [Native captures]: wrapped, its native handle handed out, or it
//   joined such a capture), whose queue also takes work accgraph never sees, the recording is a
//   capture and the backend's capture tail token (Note [Capture tail]) is non-zero and equal to
//   the one read right after that marker was recorded. A native stream whose backend has no
//   CaptureTail, or an eager one (the token is only defined while capturing), never shares: one
//   marker more, never a wrong time (this replaces Note [Native work]'s rule for captures).
// The token is read only on native capturing streams, once per recorded marker and once per
// boundary that could share: other streams pay nothing for it. Caller holds mutex_.
std::optional<uint32_t> RegionRecorder::shared_marker(const StreamEntry& entry,
                                                      const Recording& recording, Stream& stream) {
  const std::optional<LastMarker>& last = entry.last_marker;
  if (!last || last->recording.get() != &recording ||
      last->operation_count != detail::StreamAccess::operation_count(stream))
    return std::nullopt;
  if (detail::StreamAccess::native(stream)) {
    if (recording.eager || last->tail == 0) return std::nullopt;
    if (detail::StreamAccess::capture_tail(stream) != last->tail) return std::nullopt;
  }
  return last->marker;
}

uint32_t RegionRecorder::record_marker(StreamEntry& entry,
                                       const std::shared_ptr<Recording>& recording,
                                       Stream& stream) {
  const uint32_t marker = recording->marker_count;
  recording->ring->record(detail::StreamAccess::impl(stream), marker);
  ++recording->marker_count;
  const bool tail = !recording->eager && detail::StreamAccess::native(stream);
  entry.last_marker = LastMarker{recording, marker, detail::StreamAccess::operation_count(stream),
                                 tail ? detail::StreamAccess::capture_tail(stream) : 0};
  return marker;
}

void RegionRecorder::check_begin_order(const StreamEntry& entry,
                                       const std::shared_ptr<Recording>& capture,
                                       const std::string& name, std::thread::id thread,
                                       Stream& stream) {
  if (!entry.stack.empty() &&
      (capture ? capture : entry.eager_tree) != entry.stack.back().recording) {
    const OpenRegion& open = entry.stack.back();
    throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
                fmt::format("{}: region '{}' on stream {} was opened {} and is still open: end "
                            "it before regions {} begin on this stream",
                            describe("begin", name), path_of(open), stream.id(),
                            open.recording->eager ? "eagerly" : "in a capture",
                            capture ? "of the capture" : "outside the capture"),
                stream.backend_name());
  }
  if (!entry.stack.empty() && entry.stack.back().thread != thread) {
    // Note [Regions out of order]: one thread's region cannot nest in another's.
    throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
                fmt::format("{}: region '{}' on stream {} was begun by another thread and is "
                            "still open: regions on one stream nest, so another thread's "
                            "cannot begin inside it (they would end out of order); give each "
                            "thread a stream of its own, or time this stream from one thread at "
                            "a time",
                            describe("begin", name), path_of(entry.stack.back()), stream.id()),
                stream.backend_name());
  }
  if (capture && !capture->ring)
    throw Error(ErrorCode::InvalidState,
                fmt::format("{}: the capture on stream {} has no marker sequence (internal: the "
                            "profiler begins it before the capture's first region)",
                            describe("begin", name), stream.id()),
                stream.backend_name());
}

RegionInfo RegionRecorder::new_region_info(const StreamEntry& entry, Stream& stream,
                                           std::string&& name, Metadata&& metadata,
                                           std::string&& lane) {
  RegionInfo info;
  info.name = std::move(name);
  info.depth = static_cast<int>(entry.stack.size());
  if (!entry.stack.empty()) {
    info.parent = static_cast<int>(entry.stack.back().index);
    info.path = path_of(entry.stack.back()) + "/" + info.name;
  } else {
    info.path = info.name;
  }
  info.stream_id = stream.id();
  info.lane = std::move(lane);
  info.metadata = std::move(metadata);
  return info;
}

uint64_t RegionRecorder::begin(Stream& stream, const std::shared_ptr<Recording>& capture,
                               std::string&& name, Metadata&& metadata, std::string&& lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture && capture->closed)
    throw Error(ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                fmt::format("{}: the capture on stream {} ended while the region began: begin "
                            "regions of a capture between its capture_begin and capture_end",
                            describe("begin", name), stream.id()),
                stream.backend_name());
  StreamEntry* entry = &streams_[stream.id()];
  if (entry->stream.expired()) entry->stream = detail::StreamAccess::shared(stream, "begin");
  const std::thread::id thread = std::this_thread::get_id();
  check_begin_order(*entry, capture, name, thread, stream);
  std::shared_ptr<Recording> recording = capture;
  if (!recording)
    recording = entry->eager_tree ? entry->eager_tree : start_eager_tree(stream, *entry);

  RegionInfo info =
      new_region_info(*entry, stream, std::move(name), std::move(metadata), std::move(lane));
  if (std::optional<uint32_t> shared = shared_marker(*entry, *recording, stream)) {
    info.begin_marker = *shared;  // Note [Boundary sharing]
  } else {
    try {
      info.begin_marker = record_marker(*entry, recording, stream);
    } catch (...) {
      // An eager tree that this region was to start holds nothing: drop it (its sequence was
      // begun but never launched, so no report and no wait is owed for it).
      if (recording->eager && recording->regions.empty()) entry->eager_tree.reset();
      throw;
    }
  }
  recording->regions.push_back(std::move(info));
  const uint64_t serial = next_serial_++;
  entry->stack.push_back({recording, recording->regions.size() - 1, serial, thread});
  ++recording->open_regions;
  return serial;
}

bool RegionRecorder::is_open(uint64_t stream_id, uint64_t serial) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream_id);
  return it != streams_.end() && open_region_path(it->second, serial) != nullptr;
}

RegionRecorder::StreamEntry& RegionRecorder::entry_to_end(Stream& stream, uint64_t serial) {
  auto it = streams_.find(stream.id());
  if (serial != 0 && (it == streams_.end() || !open_region_path(it->second, serial))) {
    if (it != streams_.end() && it->second.abandoned > 0) --it->second.abandoned;
    throw Error(ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                fmt::format("Region::end: the region is no longer open on stream {}: the capture "
                            "it was recorded in was aborted or reset (or its stream closed it); "
                            "nothing to end",
                            stream.id()),
                stream.backend_name());
  }
  if (it != streams_.end() && it->second.stack.empty() && it->second.abandoned > 0) {
    --it->second.abandoned;
    throw Error(ErrorCode::InvalidState, ErrorReason::CaptureEnded,
                fmt::format("end: the region open on stream {} was begun in a capture that was "
                            "aborted or reset (or its stream closed it) before this end(): it "
                            "is gone, nothing to end; end a capture's regions before "
                            "capture_end or reset",
                            stream.id()),
                stream.backend_name());
  }
  if (it == streams_.end() || it->second.stack.empty())
    throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
                fmt::format("end: no region is open on stream {}: call begin(stream, name) first "
                            "(every end() closes the innermost begin() on its stream)",
                            stream.id()),
                stream.backend_name());
  return it->second;
}

void RegionRecorder::drop_out_of_order(StreamEntry& entry, const OpenRegion& open,
                                       uint64_t serial, Stream& stream) {
  // Note [Regions out of order]: dropped, so that it does not hold every later region open.
  auto dropped = std::find_if(entry.stack.begin(), entry.stack.end(),
                              [&](const OpenRegion& r) { return r.serial == serial; });
  const std::string path = path_of(*dropped);
  dropped->recording->dropped.push_back(dropped->index);
  --dropped->recording->open_regions;
  entry.stack.erase(dropped);
  throw Error(ErrorCode::InvalidState, ErrorReason::RegionOrder,
              fmt::format("Region::end: region '{}' on stream {} is not the innermost open "
                          "region: '{}' began after it and is still open, so '{}' is dropped "
                          "and not reported (the regions that began inside it still are); "
                          "end regions in the reverse order they began",
                          path, stream.id(), path_of(open), path),
              stream.backend_name());
}

std::shared_ptr<MarkerRing> RegionRecorder::close_innermost(StreamEntry& entry,
                                                            const OpenRegion& open,
                                                            Stream& stream) {
  Recording& recording = *open.recording;
  RegionInfo& info = recording.regions[open.index];
  // Never its own begin marker: an empty region keeps two (Note [Boundary sharing]), whose
  // transition is back to back (Note [Marker transitions] in report.cpp).
  std::optional<uint32_t> shared = shared_marker(entry, recording, stream);
  if (shared && *shared != info.begin_marker) {
    info.end_marker = *shared;
  } else {
    info.end_marker = record_marker(entry, open.recording, stream);
    if (shared) recording.back_to_back.push_back(info.end_marker);
  }
  entry.stack.pop_back();
  --recording.open_regions;
  if (!recording.eager || !entry.stack.empty()) return nullptr;

  // The outermost eager region ended: close the sequence and queue it for collection.
  std::shared_ptr<MarkerRing> ring = recording.ring;
  ring->close_eager_sequence(
      detail::StreamAccess::impl(stream),
      std::make_shared<const ReportLayout>(ring->source(), kept_regions(recording),
                                           std::move(recording.back_to_back)));
  entry.eager_tree.reset();
  entry.last_marker.reset();
  return ring;
}

// Note [Regions out of order]: regions nest per stream. Two rules keep every region either
// reported or refused with an error, never neither:
// - A region whose end comes while a region that began after it on the stream is still open (a
//   server that caught an error between two `with` blocks, interleaved asyncio tasks) is
//   dropped: taken off the stream's stack and left out of the layout when its tree or capture
//   closes (kept_regions: the regions inside it move up to its parent, their paths without its
//   name), and end() raises RegionOrder saying so. Left open, to be ended again, which no `with`
//   statement does, it would have every later region on the stream nest in it and never be
//   reported, without an error. The markers it recorded stay in the sequence (its begin may be
//   shared with the next region's, Note [Boundary sharing]); no region refers to them.
// - The regions open on a stream belong to one thread: a begin while the stream's innermost
//   open region was begun by another thread is a RegionOrder error. Threads sharing a stream
//   (PyTorch's default stream) open and end their regions in any order relative to each other,
//   which nesting cannot record: accepted, one thread's end would later find the other's region
//   inside its own (dropped, above) or end where the other's ends, silently. Refused at the begin,
//   the error comes at the first overlap and names the fix: a stream per thread. A region may still
//   be ended on another thread.
std::shared_ptr<MarkerRing> RegionRecorder::end(Stream& stream,
                                                const std::shared_ptr<Recording>& capture,
                                                uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  StreamEntry& entry = entry_to_end(stream, serial);
  OpenRegion open = entry.stack.back();
  if (serial != 0 && open.serial != serial) drop_out_of_order(entry, open, serial, stream);
  if ((capture ? capture : entry.eager_tree) != open.recording)
    throw Error(
        ErrorCode::InvalidState, ErrorReason::RegionOrder,
        fmt::format("end: region '{}' on stream {} was opened {} but the stream is {} "
                    "now: end a region where it began (before capture_begin or before "
                    "capture_end)",
                    path_of(open), stream.id(), open.recording->eager ? "eagerly" : "in a capture",
                    capture ? "capturing" : "not capturing"),
        stream.backend_name());
  return close_innermost(entry, open, stream);
}

// --- streams and shutdown ----------------------------------------------------------------------

// Closes the open eager tree of `entry`, if any, without a report (its regions never ended):
// its begin_sequence and records are enqueued, so the sequence must still finish before the
// marker storage goes (retiring the ring waits for its last sequence).
void RegionRecorder::abandon_eager_tree(StreamEntry& entry, Stream& stream) {
  if (!entry.eager_tree) return;
  const std::string path =
      entry.eager_tree->regions.empty() ? "?" : entry.eager_tree->regions.front().path;
  entry.eager_tree->closed = true;
  entry.eager_tree->ring->close_eager_sequence(detail::StreamAccess::impl(stream), nullptr);
  log(LogLevel::Warning,
      fmt::format("timing: region '{}' on stream {} never ended (its stream or its profiler was "
                  "destroyed first): it is not reported",
                  path, stream.id()));
  entry.eager_tree.reset();
  entry.stack.clear();
  entry.last_marker.reset();
}

// Regions open in a capture stay counted, so capture_end says they never ended.
std::shared_ptr<MarkerRing> RegionRecorder::stream_destroyed(Stream& stream) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream.id());
    if (it == streams_.end()) return nullptr;
    std::shared_ptr<MarkerRing> eager = it->second.eager_ring;
    try {
      abandon_eager_tree(it->second, stream);
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("timing: closing the eager regions of stream {} before "
                                         "it was destroyed failed: {}",
                                         stream.id(), e.what()));
    }
    streams_.erase(it);
    return eager;
  } catch (...) {
    return nullptr;
  }
}

std::vector<std::shared_ptr<MarkerRing>> RegionRecorder::close_eager_trees() noexcept {
  std::vector<std::shared_ptr<MarkerRing>> rings;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, entry] : streams_) {
    // Alive: stream_destroyed erases the entry of a destroyed stream.
    if (entry.eager_tree) {
      if (std::shared_ptr<detail::StreamState> state = entry.stream.lock()) {
        try {
          Stream stream = detail::StreamAccess::handle(std::move(state));
          abandon_eager_tree(entry, stream);
        } catch (const std::exception& e) {
          log(LogLevel::Warning,
              fmt::format("timing: closing an open eager region failed: {}", e.what()));
        } catch (...) {
        }
      }
    }
    try {
      if (entry.eager_ring) rings.push_back(entry.eager_ring);
    } catch (...) {
    }
  }
  return rings;
}

}  // namespace accgraph::timing
