// RegionRecorder: the regions being recorded, per stream: nesting stacks, shared boundary
// markers (Note [Boundary sharing]), captures vs eager region trees (timing-internal).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "accgraph/report.hpp"
#include "accgraph/stream.hpp"
#include "accgraph/timing.hpp"
#include "marker_ring.hpp"

namespace accgraph::detail {
struct StreamState;
}

namespace accgraph::timing {

/// Regions being recorded into one marker ring: a graph's capture or one eager region tree.
/// Touched only under RegionRecorder's lock.
struct Recording {
  // A capture's ring is set when its marker sequence begins (RegionRecorder::begin_sequence:
  // at its first region or first fork), an eager tree's when it starts; null before.
  std::shared_ptr<MarkerRing> ring;
  std::vector<RegionInfo> regions;
  // The regions whose end came out of order (Note [Regions out of order]): left out of the
  // layout when the recording closes (RegionRecorder::kept_regions).
  std::vector<size_t> dropped;
  std::vector<uint32_t> back_to_back;  // markers recorded right after another (ReportLayout)
  uint32_t marker_count = 0;
  int open_regions = 0;
  bool eager = false;
  bool closed = false;  // the capture ended or was abandoned: no region may begin in it
};

/// What RegionRecorder::begin throws when a region would start an eager tree and the stream's
/// eager ring has no free slot: the caller makes room (ProfilerCore::make_room, which may wait
/// and deliver, so not under the recorder's lock) and begins again. Never reaches a user.
struct EagerRingFull {
  std::shared_ptr<MarkerRing> ring;
};

/// Lock: `mutex_`; under it only MarkerRing calls (a leaf). Recording never collects or
/// delivers (Note [Recording never delivers]): it records markers and says when an eager tree
/// closed; the profiler creates the rings and collects them.
class RegionRecorder {
 public:
  // --- captures (called from the graph lifecycle hooks) ---

  /// Starts recording a capture of graph `graph_id` on `stream`: InvalidState when a region is
  /// open eagerly on that stream. Enqueues nothing: the capture has no ring until its marker
  /// sequence begins (begin_sequence), so a capture without regions gets no marker node.
  std::shared_ptr<Recording> begin_capture(Stream& stream, uint64_t graph_id);
  /// Begins the capture's marker sequence: enqueues `ring`'s begin_sequence on `stream` (the
  /// stream of the capture's first region, or the stream a first fork forks from: Note [Marker
  /// ring] wants it before every record() of every branch) and makes `ring` the capture's.
  /// False, with nothing enqueued, when the sequence began already; InvalidState when the
  /// capture ended. When begin_sequence throws, the capture stays without a ring.
  bool begin_sequence(const std::shared_ptr<Recording>& capture,
                      const std::shared_ptr<MarkerRing>& ring, Stream& stream);
  /// Closes the capture: InvalidState naming every open region (the capture is then aborted by
  /// the core); otherwise enqueues end_sequence on `stream` when the sequence began, and returns
  /// the capture's layout (null when it has no ring: no region was recorded).
  std::shared_ptr<const ReportLayout> end_capture(const std::shared_ptr<Recording>& capture,
                                                  Stream& stream, uint64_t graph_id);
  /// Forgets an aborted or reset capture: its open regions are no longer open anywhere.
  void abandon_capture(const std::shared_ptr<Recording>& capture);

  // --- regions ---

  /// The stream's eager marker ring, or null before it has one.
  std::shared_ptr<MarkerRing> eager_ring(uint64_t stream_id) const;
  /// Gives `stream` its eager ring; false (and `ring` unused) when it has one already.
  bool adopt_eager_ring(Stream& stream, std::shared_ptr<MarkerRing> ring);

  /// Opens a region on `stream`, into `capture` (the capture the stream records into now, whose
  /// sequence began: begin_sequence) or, when null, eagerly (the stream's eager ring must exist:
  /// adopt_eager_ring). Returns its serial (what a Region handle ends). EagerRingFull when it
  /// would start an eager tree in a full ring (nothing recorded). RegionOrder error while
  /// the stream's innermost open region was begun by another thread (Note [Regions out of
  /// order]).
  /// The strings are moved from only once it succeeds.
  uint64_t begin(Stream& stream, const std::shared_ptr<Recording>& capture, std::string&& name,
                 Metadata&& metadata, std::string&& lane);
  /// Ends the innermost open region on `stream` (`capture` as in begin()); with a serial (a
  /// Region handle) that is not the innermost one, drops that region (RegionOrder error naming
  /// both; Note [Regions out of order]).
  /// Returns the stream's eager ring when this closed an eager tree (its sequence is queued
  /// there, to be collected by the caller), else null.
  [[nodiscard]] std::shared_ptr<MarkerRing> end(Stream& stream,
                                                const std::shared_ptr<Recording>& capture,
                                                uint64_t serial);
  bool is_open(uint64_t stream_id, uint64_t serial) const;

  // --- streams and shutdown ---

  /// The stream is going: closes its open eager tree without a report and forgets the stream;
  /// returns its eager ring (to retire), if any.
  std::shared_ptr<MarkerRing> stream_destroyed(Stream& stream) noexcept;
  /// For ~Profiler: closes every open eager tree; returns every eager ring (to retire).
  std::vector<std::shared_ptr<MarkerRing>> close_eager_trees() noexcept;

 private:
  struct OpenRegion {
    std::shared_ptr<Recording> recording;
    size_t index = 0;     // into recording->regions
    uint64_t serial = 0;  // what a Region handle ends
    std::thread::id thread;  // the thread that began it (Note [Regions out of order])
  };
  // The last marker recorded on a stream, and what the stream looked like right after it: a
  // boundary that comes next reuses it when nothing was enqueued since (Note [Boundary sharing]).
  struct LastMarker {
    std::shared_ptr<Recording> recording;
    uint32_t marker = 0;
    uint64_t operation_count = 0;
    uint64_t tail = 0;  // the capture tail token (native capturing streams only; 0: none)
  };
  struct StreamEntry {
    std::weak_ptr<detail::StreamState> stream;  // to close an open eager tree at ~Profiler
    std::vector<OpenRegion> stack;
    std::optional<LastMarker> last_marker;
    std::shared_ptr<MarkerRing> eager_ring;  // created on the first eager region
    std::shared_ptr<Recording> eager_tree;   // the eager tree being recorded, if any
    // Regions begun with begin() in a capture that was aborted or reset while they were open
    // (forget took them off `stack`): what an end() that finds no region open ends instead,
    // with CaptureEnded rather than "no region is open".
    size_t abandoned = 0;
  };

  std::shared_ptr<Recording> start_eager_tree(Stream& stream, StreamEntry& entry);
  // The marker a boundary of `recording` on `stream` may reuse, if any (caller holds mutex_).
  static std::optional<uint32_t> shared_marker(const StreamEntry& entry, const Recording& recording,
                                               Stream& stream);
  // Records the next marker of `recording` on `stream` and remembers it as the stream's last
  // (caller holds mutex_).
  static uint32_t record_marker(StreamEntry& entry, const std::shared_ptr<Recording>& recording,
                                Stream& stream);
  void forget(const std::shared_ptr<Recording>& recording);  // caller holds mutex_
  // begin()'s refusals once the stream's entry exists: a region of the other recording, or of
  // another thread, still open on the stream, or a capture without a marker sequence.
  static void check_begin_order(const StreamEntry& entry, const std::shared_ptr<Recording>& capture,
                                const std::string& name, std::thread::id thread, Stream& stream);
  // The new region's name, place in the stream's tree, lane and metadata (markers not yet set).
  static RegionInfo new_region_info(const StreamEntry& entry, Stream& stream, std::string&& name,
                                    Metadata&& metadata, std::string&& lane);
  // The entry of the stream whose innermost region end() closes, or end()'s refusal when none
  // is open (caller holds mutex_).
  StreamEntry& entry_to_end(Stream& stream, uint64_t serial);
  // Drops the open region `serial`, which is not the innermost (`open`), and throws RegionOrder.
  [[noreturn]] static void drop_out_of_order(StreamEntry& entry, const OpenRegion& open,
                                             uint64_t serial, Stream& stream);
  // Records the end marker of the innermost region `open` and pops it; returns the eager ring
  // when that closed the stream's eager tree.
  static std::shared_ptr<MarkerRing> close_innermost(StreamEntry& entry, const OpenRegion& open,
                                                     Stream& stream);
  // The recording's regions without the dropped ones, parents, depths and paths made anew.
  static std::vector<RegionInfo> kept_regions(Recording& recording);
  static void abandon_eager_tree(StreamEntry& entry, Stream& stream);
  static const std::string& path_of(const OpenRegion& open);
  static const std::string* open_region_path(const StreamEntry& entry, uint64_t serial);

  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, StreamEntry> streams_;
  uint64_t next_serial_ = 1;
};

}  // namespace accgraph::timing
