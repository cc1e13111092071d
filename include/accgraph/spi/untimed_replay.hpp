// SPI for backends: launching a captured graph without the timestamp markers recorded into it
// (the optional UntimedReplay interface a GraphImplInterface class may also derive from), which
// sampled timing (ProfilerOptions::sample_every) uses for the replays it does not time.
#pragma once

#include <memory>

#include "accgraph/export.hpp"

namespace accgraph {

class GraphImplInterface;
class StreamImpl;

/// Note [Sampled replays]: a profiler that times 1 replay in N (ProfilerOptions::sample_every,
/// ::overhead) launches the other N-1 without its markers, so they cost what an untimed graph
/// costs. Only the backend knows which of a graph's operations its marker set recorded, so a
/// GraphImplInterface class that can leave them out also derives from UntimedReplay. A graph
/// whose class does not (Level Zero, Vulkan, foreign graphs, older plugins), or that says it
/// cannot now, has every replay timed: sampling falls back to timing every replay and the
/// profiler counts such graphs (Profiler::replay_counts(): sampled false).
/// - (untimed.same-work) replay_untimed(stream) runs exactly the work replay(stream) runs, on
///   the same buffers, in the same stream order and with the same dependencies among it (CUDA:
///   PDL edges kept), minus every operation a TimestampMarkers set recorded into the capture:
///   begin_sequence, record and end_sequence run nothing and write nothing, so no marker slot
///   and no device-side sequence counter moves. Its outputs are bitwise those of replay().
/// - (untimed.serial) Launches by replay and replay_untimed together keep (graph.serial): one
///   after the other in launch order.
/// - (untimed.ready) can_replay_untimed(stream) is called after instantiate(), before each
///   untimed launch on `stream`; false makes that launch a timed one (replay()): e.g. a CUDA
///   graph holding memory nodes, which allow one executable only, or a launch on another stream
///   than the last one, which CUDA would not order after it. It never throws.
/// Plugin ABI 2.5 (Note [Plugin ABI]): a plugin that derives from it needs a 2.5 core.
class ACCGRAPH_API UntimedReplay {
 public:
  virtual ~UntimedReplay();
  virtual bool can_replay_untimed(const StreamImpl& stream) const noexcept = 0;
  virtual void replay_untimed(StreamImpl& stream) = 0;
};

/// The UntimedReplay of `graph`, or nullptr when its class does not implement it.
ACCGRAPH_API UntimedReplay* untimed_replay_of(GraphImplInterface& graph) noexcept;

/// Note [Untimed foreign replays]: a foreign graph (Note [Foreign graphs] in foreign_graph.hpp)
/// is captured and launched by its owner, so its untimed replays launch a copy of what the
/// owner captured, minus the markers: the copy is taken from the owner's capture while it is
/// still open (ForeignGraph::capture_end(UntimedCopy::Make), right after the last markers), and
/// launched instead of the owner's launch only where the owner said that its launch does nothing
/// else (ForeignGraph::enable_untimed_launches). The rules of UntimedReplay hold for the copy,
/// against the owner's launches: same work, bitwise the same outputs, and (untimed.serial)
/// before_owner_launch(stream) orders an owner's launch on `stream` after the copy's last
/// launch when that ran on another stream.
class ACCGRAPH_API CaptureCopy : public UntimedReplay {
 public:
  virtual void before_owner_launch(StreamImpl& stream) = 0;
};

/// The optional interface of a StreamImpl class whose backend can copy a capture under way.
class ACCGRAPH_API CapturedWork {
 public:
  virtual ~CapturedWork();
  /// Called on a stream its owner is capturing natively, before the owner ends that capture:
  /// a copy of the work captured so far (on this stream and every stream joined into its
  /// capture) that launches without the marker operations, or null where this capture cannot
  /// have one (CUDA: memory nodes, event record nodes); a failing native call throws.
  virtual std::unique_ptr<CaptureCopy> copy_capture() = 0;
};

/// The CapturedWork of `stream`, or nullptr when its class does not implement it.
ACCGRAPH_API CapturedWork* captured_work_of(StreamImpl& stream) noexcept;

}  // namespace accgraph
