// SPI for backends: launching a captured graph without the timestamp markers recorded into it
// (the optional UntimedReplay interface a GraphImplInterface class may also derive from), which
// sampled timing (ProfilerOptions::sample_every) uses for the replays it does not time.
#pragma once

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

}  // namespace accgraph
