// The rules of the SPI contract the conformance cases check, as include/accgraph/spi/backend.hpp
// writes them, each with the mistake that most often breaks it (printed with every failure).
#include <stdexcept>

#include "conformance.hpp"

namespace accgraph::conformance {

const std::vector<Rule>& rules() {
  static const std::vector<Rule> list = {
      // Note [Core preconditions]
      {"core.arguments", "Note [Core preconditions]",
       "the core refuses bad devices, null pointers, zero sizes and streams of another backend or "
       "device before the backend is called",
       "the core's argument checks changed (this accgraph is broken, not your backend), or the "
       "backend's devices() disagrees with what it accepts"},
      {"core.order", "Note [Core preconditions]",
       "the core refuses calls out of order (capture_end without capture_begin, replay before "
       "capture, synchronize while capturing, ...) with InvalidState",
       "the backend's graph or stream changed state on a call the core refused, or is_capturing() "
       "does not follow capture_begin/capture_end/reset"},
      {"core.gates", "Note [Core preconditions]",
       "what capabilities() does not claim (host_calls, timed_delay, multi_stream_capture, capture "
       "modes, pool_sharing) is Error(Unsupported) from the core",
       "capabilities() changes between calls, or the backend's objects accepted a call the core "
       "should have refused first"},
      {"caps.honest", "Note [Core preconditions]",
       "every capability claimed works: host_call runs, delay lasts at least its duration, "
       "eagerly and in a capture",
       "capabilities() claims something the stream does not really do (e.g. delay() that returns "
       "at once, host_call that is dropped in a capture)"},
      // Note [Lifetimes]
      {"life.backend", "Note [Lifetimes]",
       "one Backend object per process, created on first use and never destroyed",
       "the plugin's factory returned a new backend per call, or the backend keeps per-object "
       "state in globals that die first"},
      {"life.stream", "Note [Lifetimes]",
       "a graph does not use its capture stream after capture_end: it replays on any stream, also "
       "once the capture stream is destroyed",
       "the graph kept a pointer to the capture stream's queue and launches there, or fails once "
       "it is gone"},
      {"life.enqueued", "Note [Lifetimes]",
       "work already enqueued (a replay) completes when the graph is reset or destroyed right "
       "after",
       "the enqueued replay refers to the graph's executable through the graph object (this) "
       "instead of holding it (shared_ptr), so reset() pulls it away before it runs"},
      // Note [Failures]
      {"failure.synchronize", "Note [Failures]",
       "a failed operation (a throwing host_call) is thrown by the next synchronize() of its "
       "stream as Error(BackendError) with the original message",
       "the stream catches the failure and drops it (or only logs it) instead of keeping it for "
       "the next synchronize()"},
      {"failure.once", "Note [Failures]",
       "a failure is reported once; later work still runs and the stream stays usable",
       "synchronize() does not clear the failure it reported, or the queue stops running work "
       "after a failure"},
      {"failure.replay", "Note [Failures]",
       "a failed node does not stop the replay: the other nodes run and synchronize() of the "
       "replay stream reports it",
       "the replay stops at the first failing node (later nodes, and the markers' end_sequence, "
       "never run), or the failure goes to the capture stream"},
      {"failure.destroyed", "Note [Failures]",
       "a stream destroyed with an unreported failure logs it (Warning or Error) with the original "
       "message",
       "the queue's destructor discards the remembered failure without logging it"},
      // Note [Streams]
      {"stream.order", "Note [Streams]",
       "operations of one stream run in enqueue order; all are done when synchronize() returns",
       "some operations run on another engine or thread than others without ordering between "
       "them, or synchronize() returns before the work is done"},
      {"stream.capture", "Note [Streams]",
       "while capturing, operations are recorded, not run; each replay runs them once",
       "the stream runs operations at once even while a capture is attached (or records them and "
       "also runs them)"},
      {"stream.wrap", "Note [Streams]",
       "wrap_stream(native_handle()) of a live stream is the same queue: same handle, one order",
       "wrap_stream creates a new queue instead of looking up the one behind the handle"},
      // Note [Fork/join]
      {"fork-join.eager", "Note [Fork/join]",
       "outside a capture, a.wait_for(b) orders a's later work after b's earlier work",
       "wait_for does nothing (or only waits for what b has *started*) on an asynchronous queue"},
      {"fork-join.fork", "Note [Fork/join]",
       "a non-capturing stream waiting on a capturing one joins its capture: it is_capturing() and "
       "its work is recorded",
       "wait_for on a capturing stream does not attach this stream to the other's capture"},
      {"fork-join.join", "Note [Fork/join]",
       "work recorded after a join runs after the joined stream's recorded work, in every replay",
       "the replay runs each stream's recorded operations in turn, or ignores the recorded "
       "dependencies"},
      {"fork-join.unjoined", "Note [Fork/join]",
       "capture_end with a forked stream that was not joined back throws InvalidState (say "
       "origin.wait(forked)) and leaves the graph reset",
       "capture_end does not compare what each forked stream recorded with what the origin "
       "waited for"},
      {"fork-join.leave", "Note [Fork/join]",
       "every stream that joined a capture leaves capture mode at capture_end, a failed "
       "capture_end and reset",
       "capture_end/reset detach only the origin stream, leaving forked streams recording"},
      {"fork-join.refused", "Note [Fork/join]",
       "the core refuses a capturing stream waiting on an eager one, and streams of two captures, "
       "with InvalidState",
       "(a core rule) the core's checks in Stream::wait changed; or the backend's is_capturing() "
       "is wrong"},
      // Note [Nested replay]
      {"replay.nested", "Note [Nested replay]",
       "replay() on a capturing stream records the whole replay into that capture as one unit "
       "(or is Unsupported), never runs it at once",
       "replay() launches the executable directly instead of enqueuing it through the stream's "
       "capture-aware path"},
      // Note [Graph lifecycle]
      {"graph.serial", "Note [Graph lifecycle]",
       "launches of one graph run one after another in launch order, on any streams",
       "replay() on a second stream does not wait for the graph's previous launch on another "
       "stream"},
      {"graph.reset", "Note [Graph lifecycle]",
       "reset() aborts a capture (the stream leaves capture mode, nothing recorded runs) and the "
       "graph captures anew",
       "reset() does not detach the capture from the stream, or keeps the old recording"},
      {"graph.keep-graph", "Note [Graph lifecycle]",
       "with keep_graph, instantiate() later (or the first replay) builds an executable of exactly "
       "the captured work",
       "instantiate() under keep_graph copies or moves the wrong recording (an empty executable)"},
      {"graph.pool", "Note [Graph lifecycle]",
       "pool(): the capture's pool id, shared ids honoured, kept after capture_end and reset; an "
       "unknown id is InvalidArgument naming it",
       "pool() is reset to {0, 0} with the graph, or the backend issues a new pool for a shared "
       "id (use accgraph::PoolTable)"},
      {"graph.debug-dump", "Note [Graph lifecycle]",
       "debug_dump(path) after a debug-mode capture writes a non-empty file describing the "
       "operations; an unwritable path is an Error naming it",
       "debug_dump writes nothing (the recorded names were not kept), or ignores a failed open"},
      // Note [Capture modes]
      {"mode.honoured", "Note [Capture modes]",
       "a listed capture mode works; an unlisted one is Unsupported from the core",
       "capabilities().capture_modes lists a mode the graph refuses or mishandles"},
      {"mode.thread-local", "Note [Capture modes]",
       "under ThreadLocal, other threads allocate, create streams, run and synchronize eager work "
       "while the capture runs",
       "the backend applies Global rules (refusing calls from every thread) to a ThreadLocal "
       "capture"},
      {"mode.relaxed", "Note [Capture modes]",
       "under Relaxed, the capturing thread itself may allocate and run and synchronize eager work "
       "on other streams",
       "the backend applies ThreadLocal or Global rules to a Relaxed capture"},
      // Note [Marker ring]
      {"marker.slot", "Note [Marker ring]",
       "each sequence writes its own ring slot, chosen when it runs: replays in flight on one or "
       "several streams keep their times apart",
       "record() picks the slot when it is called (at capture time) instead of when the sequence "
       "runs, so every replay writes one slot"},
      {"marker.branches", "Note [Marker ring]",
       "records on parallel branches (forked streams) write the slot of their own sequence",
       "the slot is tracked per stream (set by begin_sequence on the origin only), so a forked "
       "stream's records land in a stale slot"},
      {"marker.complete", "Note [Marker ring]",
       "is_complete(s) is true once s's end_sequence ran, false before (and for unlaunched s), "
       "without anyone synchronising",
       "is_complete() tests that the sequence *began*, or is only updated by synchronize()"},
      {"marker.read", "Note [Marker ring]",
       "read() gives nanoseconds on a monotonic clock: markers around known work are at least "
       "that far apart, in stream order",
       "the clock is not in nanoseconds (microseconds, ticks), or read() copies the wrong slot"},
      {"marker.options", "Note [Marker ring]",
       "create_markers honours MarkerOptions: the ring depth asked for, the default strategy, "
       "Unsupported/InvalidArgument for unknown strategies and too deep rings",
       "create_markers ignores MarkerOptions (use MarkerOptions::resolve_strategy and "
       "resolve_ring_depth)"},
      {"marker.budget", "Note [Marker budget]",
       "(optional) a set may size its ring by MarkerOptions::memory_budget once, after a "
       "captured sequence ended and before its first launch; an explicit ring_depth wins; no "
       "replay is lost or overwritten",
       "the set resizes storage that a launched replay already writes, or sizes by the budget "
       "though ring_depth was given (use MarkerOptions::budget_depth)"},
      {"untimed.same-work", "Note [Sampled replays]",
       "(optional) replay_untimed runs the graph's work and none of the markers recorded into "
       "it: no sequence completes, and the next timed replay writes the slot the timing layer "
       "expects; a profiler's sampled replays are then exactly the scheduled ones",
       "replay_untimed runs the timed executable (its markers move the device-side sequence "
       "counter, so later reports read the wrong slot), or leaves out work with the markers"},
      {"untimed.fallback", "Note [Sampled replays]",
       "a graph that cannot launch without markers has every replay timed and reported, and "
       "Profiler::replay_counts() says it was not sampled",
       "replays the schedule leaves untimed are lost (not run, or run and never reported)"},
      {"clock.sample", "Note [Clock sampling]",
       "(optional) sample_clock reads the device's marker clock between two CLOCK_REALTIME "
       "reads, samples in order, so calibrate_clock's offset puts marker times on the host clock",
       "the device read is of another clock than the markers' (CLOCK_REALTIME instead of "
       "steady_clock, a raw counter), or the host reads are not taken around it"},
  };
  return list;
}

const Rule& rule(const std::string& id) {
  for (const Rule& r : rules())
    if (id == r.id) return r;
  throw std::logic_error("accgraph-conformance: unknown rule '" + id + "'");
}

}  // namespace accgraph::conformance
