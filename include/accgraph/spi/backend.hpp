// The backend SPI: the interfaces a backend (built-in or plugin) implements and the contract
// rules they keep. Backends reach the core only through accgraph/spi/, types.hpp and error.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accgraph/error.hpp"
#include "accgraph/export.hpp"
#include "accgraph/registry.hpp"  // BackendFactory (and the Registry that takes one)
#include "accgraph/types.hpp"

namespace accgraph {

// ================================================================================================
// The SPI contract, rule by rule.
//
// Every rule has a name in parentheses, e.g. (fork-join.leave). The conformance suite
// (`accgraph-conformance --plugin libyours.so --backend yours`) has a case for every rule and names
// the rule when it fails; tests/mutants/README.md in the accgraph sources lists rule -> case ->
// the deliberately broken backend that shows the case catches it. Rules marked [core] are kept by
// accgraph's core, not by the backend: they are what a backend may rely on without re-checking.
//
// Note [Core preconditions]: before any call reaches a backend, the core (Stream, Buffer,
// AcceleratorGraph and the timing layer) has checked the following, so a backend need not check
// them again (re-checking is harmless, but errors then differ between backends):
// - (core.arguments) [core] every `device` passed to Backend is in [0, devices().size()); copy and
//   fill get non-null pointers and bytes > 0; host_call gets a non-empty function; delay gets a
//   duration from 0 to 24 hours; allocate gets bytes > 0. Every StreamImpl passed to a backend's
//   objects (wait_for, capture_begin, replay, the markers) was made by this backend's
//   create_stream or wrap_stream; replay's stream is on the capture's device; wait_for never gets
//   the same StreamImpl as `this` (two wrappers of one native queue are possible: see
//   (stream.wrap)).
// - (core.order) [core] GraphImplInterface is called in this order only: capture_begin when the
//   graph holds nothing (new, or after reset) and the stream is not capturing; capture_end only
//   while capturing; instantiate once, only after a successful capture_end; replay only once
//   instantiated (the core instantiates first when keep_graph left it Captured) and never while
//   the graph itself is capturing; debug_dump only after a successful capture_end, with a
//   non-empty path; reset at any time, also during a capture. StreamImpl::synchronize is never
//   called while that stream is_capturing(). A graph is used by one thread at a time.
// - (core.gates) [core] Note [Capability gates]: what capabilities(device) does not claim never
//   reaches the backend: host_call without host_calls, delay without timed_delay, a wait_for on a
//   capturing stream (a fork) without multi_stream_capture, capture_begin with a mode that
//   capabilities().supports() denies, and capture_begin with a pool other than {0, 0} without
//   pool_sharing: each is Error(Unsupported) from the core, naming the capability. The core reads
//   capabilities(device) once per stream, at its creation.
// - (caps.honest) What capabilities(device) claims works, eagerly and inside a capture: a claimed
//   host_call runs the function (once per replay when captured), a claimed delay lasts at least
//   its duration, a claimed mode, fork/join or pool sharing behaves as the notes below say.
//   Claim less rather than more: the core turns every unclaimed use into a clear Unsupported.
//
// Note [Lifetimes]
// - (life.backend) [core] A Backend is created once per process, on first use, by the Registry,
//   and never destroyed (the Registry is leaked on purpose and a plugin library that was accepted
//   stays loaded): streams, buffers, graphs and markers never outlive their backend, also when
//   they are destroyed during static destruction. Their destructors must not throw (log instead)
//   and must tolerate a vendor runtime that is shutting down.
// - (life.stream) A graph does not keep using the StreamImpl its capture began on: after
//   capture_end it replays on whatever stream replay() gets, also after the capture stream was
//   destroyed. Destroying the capture stream *during* the capture makes the core call reset()
//   first (the StreamImpl is still alive then).
// - (life.enqueued) Work already enqueued (a replay, a marker, a copy) completes normally when the
//   graph is reset or destroyed, or the stream is destroyed, right after enqueuing it: the
//   enqueued work keeps what it uses alive (or the destructor waits for it), as
//   cudaGraphExecDestroy and cudaStreamDestroy do. The caller keeps buffers alive until the work
//   using them finished, and keeps a TimestampMarkers object alive while a graph holding its
//   markers may be replayed (the timing layer does: until that graph is reset or destroyed).
// - Objects of one backend may be destroyed in any order (a graph before or after its streams,
//   a wrapper before the stream it wraps); a wrapper must not be used after the stream that owns
//   the native queue is gone: then its operations throw Error(InvalidState) or keep working, never
//   touch freed memory.
//
// Note [Failures]: enqueued work that fails when it runs (a host_call that throws, a node of a
// replay that fails) cannot throw from the call that enqueued it, which has returned already.
// - (failure.synchronize) The first failure since the previous synchronize() of a stream is thrown
//   by the next synchronize() of the stream the work was enqueued (or replayed) on, as
//   Error(BackendError) whose message contains the original exception's what() and names the
//   failed operation. Enqueueing never throws for a failure of earlier work.
// - (failure.once) It is reported once: the synchronize() after that succeeds (unless new work
//   failed). Work enqueued after the failed operation still runs, and the stream stays usable.
// - (failure.replay) A failed node does not stop the replay: the other nodes still run (so that a
//   marker sequence still ends, see Note [Marker ring]), and the failure is reported by
//   synchronize() of the replay's stream, once per failed replay.
// - (failure.destroyed) Never dropped: a stream destroyed with a failure not yet reported logs it
//   (accgraph::log, LogLevel::Warning or Error) with the original message.
// ================================================================================================

class GraphImplInterface;

/// A backend's in-order queue (a cudaStream_t, an immediate command list, a host worker queue).
/// Every operation is enqueued and may return before the work runs; while the stream is
/// capturing, operations are recorded into the graph instead of run.
///
/// Note [Streams]
/// - (stream.order) The operations of one stream run in the order they were enqueued, each after
///   the previous one finished; all of them have finished when synchronize() returns. Running
///   an operation before enqueue returns is allowed (a synchronous backend is the degenerate
///   in-order queue); running it out of order is not.
/// - (stream.capture) While is_capturing(), copy, fill, host_call, delay, replay and the markers'
///   operations are recorded into the capture, not run: they run when the graph is replayed,
///   once per replay. is_capturing() is true from capture_begin (or from the fork that joined
///   this stream, Note [Fork/join]) until the capture ends, fails or is reset.
/// - (stream.wrap) wrap_stream(device, s.native_handle()) of a live stream `s` gives a second
///   StreamImpl on the same queue: work enqueued through either runs in one order, and
///   native_handle() is the same. Destroying the wrapper leaves the queue alone.
/// Operations of one StreamImpl may be called from several threads; they are then enqueued in
/// some order consistent with each thread's own order.
class ACCGRAPH_API StreamImpl {
 public:
  virtual ~StreamImpl();

  virtual int device() const = 0;
  /// The native queue (cudaStream_t, ze_command_list_handle_t, ...). Not owned by the caller.
  virtual void* native_handle() const = 0;

  /// Portable operations, legal eagerly and inside a capture.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, uint8_t value, size_t bytes) = 0;

  /// Enqueues a C++ callable (Capabilities::host_calls). Default: Unsupported.
  virtual void host_call(std::function<void()> fn);
  /// Enqueues device work that lasts at least `duration` (Capabilities::timed_delay). Default:
  /// Unsupported.
  virtual void delay(std::chrono::nanoseconds duration);

  /// Makes this stream wait for all work enqueued on `other` so far (an event record + wait).
  /// Never blocks the calling thread on a device that runs asynchronously.
  ///
  /// Note [Fork/join]: streams take part in a capture by waiting on each other, as in CUDA.
  /// - (fork-join.eager) Outside any capture, `a.wait_for(b)` makes the work enqueued on `a` after
  ///   the call run after all the work enqueued on `b` before it (an event record on `b`, a wait
  ///   on `a`). Legal on every backend; it needs no capability.
  /// - (fork-join.fork) When `b` is capturing and `a` is not, `a.wait_for(b)` forks the capture:
  ///   `a` joins b's capture (a.is_capturing() becomes true; the core records which graph) and
  ///   what `a` enqueues next is recorded, ordered after everything b recorded so far. Only with
  ///   Capabilities::multi_stream_capture (core.gates).
  /// - (fork-join.join) When both are in the same capture, `a.wait_for(b)` orders a's later
  ///   recorded work after b's recorded work in every replay. The origin waiting on a forked
  ///   stream joins it back.
  /// - (fork-join.unjoined) At capture_end, every stream that joined the capture must be joined:
  ///   the origin stream waited, directly or through other joined streams, on the last
  ///   operation that stream recorded. Otherwise capture_end throws Error(InvalidState) saying to
  ///   call origin.wait(forked) before capture_end, and leaves the graph reset. A stream that
  ///   recorded nothing after joining needs no join (a backend whose native API insists, as
  ///   CUDA's may, joins it itself or reports it the same way).
  /// - (fork-join.leave) Every stream that joined the capture leaves capture mode when the capture
  ///   ends (capture_end, successful or not), is reset, or its graph is destroyed: afterwards it
  ///   runs eager work again. None of its recorded work runs outside a replay.
  /// - (fork-join.refused) [core] The core refuses, with Error(InvalidState) and before the
  ///   backend is called, the two waits no backend can record: a capturing stream waiting on a
  ///   stream that is not capturing ("a graph cannot wait for eager work": synchronize() the other
  ///   stream before capture_begin), and a stream waiting on a stream of another capture.
  virtual void wait_for(StreamImpl& other) = 0;

  /// Blocks until all enqueued work is done, then throws the first unreported failure of that
  /// work (Note [Failures]). Never called while capturing (core.order).
  virtual void synchronize() = 0;
  virtual bool is_capturing() const = 0;
};

/// A device or host allocation owned by a backend (freed by the destructor).
class ACCGRAPH_API BufferImpl {
 public:
  virtual ~BufferImpl();
  virtual void* data() const = 0;
  virtual size_t size() const = 0;
  virtual MemoryKind kind() const = 0;
};

/// One captured graph, mirroring PyTorch's at::GraphImplInterface with an explicit stream.
/// The core (AcceleratorGraph) checks call order before it calls these (core.order in Note
/// [Core preconditions]): capture_begin only when empty, capture_end only while capturing,
/// instantiate once after capture_end, replay only after instantiate, reset at any time.
///
/// Note [Graph lifecycle]
/// - (graph.serial) Launches of one graph run one after another in launch order, whatever
///   streams they are replayed on (as cudaGraphLaunch serialises launches of one executable):
///   launch k+1 starts after launch k finished, without the caller synchronising. The marker
///   ring relies on it (Note [Marker ring]).
/// - (graph.reset) reset() drops the captured work and the executable; during a capture it aborts
///   it (nothing recorded runs, every stream of the capture leaves capture mode,
///   (fork-join.leave)). The graph then captures again as if new: a replay runs only the new
///   capture's work.
/// - (graph.keep-graph) With GraphArgs::keep_graph, capture_end keeps the captured graph and
///   instantiate() (called by the core later, or by the first replay) builds the executable
///   from it; the result replays exactly the captured work.
/// - (graph.pool) Note [Pool sharing] in pool_table.hpp. pool() is {0, 0} before the first
///   capture; from capture_begin on it is the id of the capture's pool (never {0, 0}), the pool
///   passed in when one was shared; it keeps that id after capture_end, a failed capture_end and
///   reset() (the id then names a live pool only while some graph still holds it). A
///   capture_begin that throws leaves pool() as it was. An id that names no live pool is
///   Error(InvalidArgument) naming the id (PoolTable does all of this).
/// - (graph.debug-dump) enable_debug_mode() may come at any time and takes effect at the next
///   capture_begin. After a successful capture_end of a capture begun in debug mode (or with
///   keep_graph), debug_dump(path) writes a non-empty text file at `path` describing the
///   captured operations: Graphviz DOT where the native API writes it (CUDA, Level Zero native
///   graphs, host), otherwise one line or node per operation. Without debug mode it may throw
///   Error(InvalidState) saying to call enable_debug_mode() before capture_begin (once
///   instantiation dropped the captured graph), or write what it still knows. A path that cannot be
///   written is an Error naming the path. The core refuses debug_dump before capture_end, after
///   reset and after a failed capture (the graph is Empty then).
class ACCGRAPH_API GraphImplInterface {
 public:
  virtual ~GraphImplInterface();
  /// Starts recording `stream` (it is_capturing() from now on) into a capture drawing from
  /// `pool` ({0, 0}: a new private pool) under `mode`.
  ///
  /// Note [Capture modes]: a mode says which calls *other than the capture's own work* stay
  /// legal while the capture runs (CUDA's cudaStreamCaptureMode).
  /// - (mode.honoured) [core, then backend] The core passes only modes in
  ///   Capabilities::capture_modes, or Default, which means the backend's documented default
  ///   (Global on every in-tree backend); others are Error(Unsupported) from the core. A listed
  ///   mode is honoured, never silently treated as another: capture, capture_end and replay work
  ///   under it.
  /// - (mode.thread-local) To list ThreadLocal: while a ThreadLocal capture runs, other threads
  ///   may allocate buffers, create streams, enqueue work on streams that are not capturing and
  ///   synchronize() them, and that work runs eagerly and is not recorded; the capture is not
  ///   disturbed by them. (Global may refuse such calls from any thread, as CUDA does.)
  /// - (mode.relaxed) To list Relaxed: additionally, the capturing thread itself may allocate
  ///   buffers and enqueue work on, and synchronize(), streams that are not capturing; that work
  ///   runs eagerly and the capture is not disturbed.
  /// A backend on which nothing is illegal during a capture (host) honours every mode by
  /// doing nothing; one that cannot tell threads apart lists Global only.
  virtual void capture_begin(StreamImpl& stream, PoolId pool, CaptureMode mode) = 0;
  /// Ends the capture. On failure the implementation leaves itself reset and every stream of the
  /// capture out of capture mode, then throws (fork-join.unjoined, fork-join.leave).
  virtual void capture_end() = 0;
  virtual void instantiate() = 0;
  /// Launches the executable on `stream`, in stream order (graph.serial).
  ///
  /// Note [Nested replay]
  /// - (replay.nested) When `stream` is itself capturing (into another graph), the replay is
  ///   recorded into that capture as one unit, not run: the whole of this graph's work runs, in
  ///   order, each time the outer graph is replayed, at its position among the outer graph's
  ///   operations (CUDA records a child-graph node). A backend that cannot do this throws
  ///   Error(Unsupported) and records nothing (Level Zero); it never runs the graph at once. The
  ///   timing layer refuses a *timed* graph here itself (its marker sequences could not be
  ///   numbered).
  virtual void replay(StreamImpl& stream) = 0;
  /// See (graph.reset). Called by the core also to abort a capture (its stream was destroyed, an
  /// observer failed, the graph was destroyed): must not assume the capture can still end.
  virtual void reset() = 0;
  /// See (graph.pool).
  virtual PoolId pool() const = 0;
  /// See (graph.debug-dump).
  virtual void enable_debug_mode() = 0;
  virtual void debug_dump(const std::string& path) = 0;
  virtual GraphStats stats() const { return {}; }
};

/// Options for a marker set, chosen per profiler.
struct MarkerOptions {
  std::string strategy;   ///< one of Capabilities::marker_strategies; empty = the backend default
  size_t ring_depth = 0;  ///< requested replays in flight; 0 = the backend default
  /// Bytes of marker storage the set may size its ring to once it knows what one replay stores
  /// (marker.budget); 0 = no budget: the ring keeps its depth. An explicit ring_depth wins.
  /// Appended in 0.2, plugin ABI 2.3 (the field after ring_depth): see Note [Marker budget].
  size_t memory_budget = 0;

  /// For Backend::create_markers: the strategy to build, `strategy` or `offered[0]` (the
  /// backend's default) when it is empty. Throws Error(Unsupported), attributed to `backend`
  /// and listing what it offers, for a name not in `offered`.
  std::string resolve_strategy(const std::vector<std::string>& offered,
                               const std::string& backend) const {
    if (strategy.empty() && !offered.empty()) return offered.front();
    for (const std::string& name : offered)
      if (name == strategy) return name;
    std::string list;
    for (size_t i = 0; i < offered.size(); ++i)
      list += (i == 0                    ? "'"
               : i + 1 == offered.size() ? " and '"
                                         : ", '") +
              offered[i] + "'" + (i == 0 && offered.size() > 1 ? " (default)" : "");
    throw Error(ErrorCode::Unsupported,
                "create_markers: unknown marker strategy '" + strategy + "': the " + backend +
                    " backend offers " + (list.empty() ? std::string("none") : list),
                backend);
  }

  /// For Backend::create_markers: the ring depth to build, `ring_depth` or `default_depth`
  /// when it is 0. Throws Error(InvalidArgument), attributed to `backend`, above `max_depth`.
  size_t resolve_ring_depth(size_t default_depth, size_t max_depth,
                            const std::string& backend) const {
    const size_t depth = ring_depth == 0 ? default_depth : ring_depth;
    if (depth > max_depth)
      throw Error(ErrorCode::InvalidArgument,
                  "create_markers: ring depth " + std::to_string(depth) + " is larger than the " +
                      backend + " backend's maximum of " + std::to_string(max_depth) +
                      ": ask for fewer replays in flight",
                  backend);
    return depth;
  }

  /// For a set that sizes its ring by the budget (marker.budget): the depth for a ring whose
  /// slot stores `bytes_per_slot` bytes, `current` when ring_depth was given or there is no
  /// budget, else memory_budget / bytes_per_slot, at least 1 and at most `max_depth`.
  size_t budget_depth(size_t bytes_per_slot, size_t current, size_t max_depth) const {
    if (ring_depth != 0 || memory_budget == 0) return current;
    const size_t depth = memory_budget / (bytes_per_slot == 0 ? 1 : bytes_per_slot);
    return depth < 1 ? 1 : depth > max_depth ? max_depth : depth;
  }
};

/// Timestamp markers: "write a timestamp into marker i" enqueued on a stream, eagerly or inside
/// a capture, and read back as nanoseconds on one clock once the work has run.
///
/// See Note [Marker ring]. A *sequence* is one execution of the recorded markers: one replay of
/// a graph, or one eager begin_sequence..end_sequence run. Sequences are numbered 0, 1, 2, ... in
/// launch order; sequence s uses ring slot s % ring_depth(). The caller never has more than
/// ring_depth() sequences launched and not yet read, so a slot is never overwritten unread.
///
/// Note [Marker ring]: the head of each sequence (begin_sequence) picks the ring slot on the
/// device (a device-side counter, a rotated event set, a staging copy), so launching K replays
/// back to back needs no host work per region and no host wait. The tail (end_sequence)
/// publishes completion, so is_complete() is a cheap poll. The timing layer collects the oldest
/// pending sequence first when the ring is full: reports are never overwritten or lost.
/// What the caller (the timing layer) guarantees: one marker set belongs either to one graph
/// (its capture recorded begin_sequence on the origin stream before every record() and before
/// the capture's first fork, the records on any stream of the capture, end_sequence last on the
/// origin after every fork joined; the set is created, and begin_sequence recorded, only when
/// the capture's first region begins or it first forks, so a capture with neither records no
/// marker operation at all) or to eager sequences of one stream; calls into one object are
/// serialised (never two at once); at most ring_depth() sequences are launched and unread.
/// - (marker.slot) Up to ring_depth() sequences of one set may be in flight at once: replays of
///   its graph launched back to back, on one stream or on several. Each writes its own slot,
///   chosen when the sequence *runs* (begin_sequence's operation), not when record() was called:
///   a graph's markers were recorded once, at capture, and every replay must land in its own
///   slot. Since launches of one graph are serialised (graph.serial) and eager sequences share
///   one stream, sequences complete in launch order.
/// - (marker.branches) Within one sequence, record() operations on parallel branches (streams
///   forked into the capture) may run concurrently; they write the slot of the sequence that the
///   branch belongs to, not of another one.
/// - (marker.complete) is_complete(s) is true once sequence s's end_sequence has run, and then
///   stays true (as it is for every sequence before s); false before that, and for a sequence
///   not launched yet. It never blocks and becomes true without anyone calling synchronize()
///   (the device publishes it). wait(s) blocks until is_complete(s).
/// - (marker.read) read(s, times, count) of a complete, unread sequence writes `count` times in
///   nanoseconds on one monotonic clock of the device (kUnmeasurable where unknown), and
///   allocates nothing for them: markers that ran in order on one stream have non-decreasing
///   times, and two markers around work of a known duration are at least that far apart (within
///   2 * resolution_ns()).
/// - (marker.options) create_markers builds MarkerOptions::strategy (the default, offered[0],
///   when empty; an unknown name is Error(Unsupported) listing the offered ones) with
///   ring_depth() equal to MarkerOptions::ring_depth (the backend's default when 0; above its
///   maximum Error(InvalidArgument)). MarkerOptions::resolve_* do exactly this.
/// - (marker.budget) Optional. A set created with MarkerOptions::ring_depth 0 and a non-zero
///   memory_budget may change ring_depth() once, after the end_sequence() of a sequence recorded
///   into a capture and before its first before_launch() returns, while no sequence of the set
///   has run (a set belongs to one graph: nothing ran before its first launch): to
///   MarkerOptions::budget_depth of the bytes one ring slot of that sequence stores. From then
///   on it never changes. A set that keeps the depth it was created with conforms (every set of
///   a backend built before this rule). See Note [Marker budget].
///
/// Note [Marker budget]: a fixed ring of K replays makes a replay loop that runs ahead of the
/// device wait for it once K replays are unread, so the host is paced by the device (9.6x host time
/// per replay on an H100 at K = 16: bench/README.md, 'Targets and figures the code cites'). What K
/// replays cost in memory is known only when the capture ended (markers per sequence x bytes per
/// stamp), and the set is created at the capture's first region (Note [Deferred ring] in
/// timing/engine/graph_timing.hpp); before the first launch nothing has written the storage, so the
/// set can still size it then. The timing layer (MarkerRing) reads ring_depth() again after
/// end_sequence() and after the first before_launch(), and waits for the oldest replay only when
/// that many are unread; it counts every such wait (Profiler::ring_waits). The budget is a
/// ProfilerOptions field (marker_memory); ring_depth stays an explicit override. The field is
/// appended to MarkerOptions, so a plugin built before it (which never reads it) keeps working; the
/// field is plugin ABI 2.3, and a core refuses a plugin of a newer minor than its own, so a plugin
/// that reads it never loads into a core that does not pass it (Note [Plugin ABI]). cuda's device
/// timestamps size at end_sequence (the pinned ring is allocated there), SteadyClockMarkers at the
/// first before_launch (its capture's operations have not run); slot rings and external events keep
/// a fixed depth.
class ACCGRAPH_API TimestampMarkers {
 public:
  /// read() returns this for a marker whose time cannot be determined, e.g. when the device
  /// counter may have wrapped more than once since the sequence began; the profiler reports
  /// regions that use it as unmeasurable. The sentinel of accgraph/types.hpp, by its SPI name.
  static constexpr uint64_t kUnmeasurable = ::accgraph::kUnmeasurable;

  virtual ~TimestampMarkers();

  virtual std::string strategy() const = 0;
  virtual size_t ring_depth() const = 0;
  virtual uint64_t resolution_ns() const = 0;

  /// Enqueued once at the start of a sequence (for graphs: in the capture, before its first
  /// record() and its first fork), before any record().
  virtual void begin_sequence(StreamImpl& stream) = 0;
  /// Enqueues "write the time into marker `marker`" (markers are numbered 0.. per sequence).
  virtual void record(StreamImpl& stream, uint32_t marker) = 0;
  /// Enqueued once at the end (after every stream has joined back), after the last record().
  virtual void end_sequence(StreamImpl& stream) = 0;

  /// Around each launch of a graph holding these markers (host side, same thread as replay).
  virtual void before_launch(GraphImplInterface& graph, StreamImpl& stream, uint64_t sequence);
  virtual void after_launch(GraphImplInterface& graph, StreamImpl& stream, uint64_t sequence);
  /// Called for an eager sequence right after its end_sequence was enqueued.
  virtual void after_eager_sequence(StreamImpl& stream, uint64_t sequence);

  /// True when sequence `sequence` has finished and read() will not block.
  virtual bool is_complete(uint64_t sequence) = 0;
  /// Blocks until sequence `sequence` has finished.
  virtual void wait(uint64_t sequence) = 0;
  /// Writes the `count` marker times of a finished sequence into `times[0..count)`, in
  /// nanoseconds on the backend's clock (kUnmeasurable for a marker whose time is unknown).
  /// `times` points to `count` writable values owned by the caller (it may be null when `count`
  /// is 0); read() allocates nothing for them, so the timing layer reuses one buffer.
  virtual void read(uint64_t sequence, uint64_t* times, size_t count) = 0;
};

/// A backend: the factory for its streams, buffers, graphs and markers. One instance per process,
/// created by the Registry on first use and never destroyed (life.backend). All methods are
/// thread-safe. Arguments were checked by the core (Note [Core preconditions]).
class ACCGRAPH_API Backend {
 public:
  virtual ~Backend();

  virtual std::string name() const = 0;
  /// Usable devices; a backend without devices is reported unavailable by its factory instead.
  virtual std::vector<DeviceInfo> devices() const = 0;
  virtual Capabilities capabilities(int device) const = 0;

  virtual std::unique_ptr<StreamImpl> create_stream(int device) = 0;
  /// Wraps a native queue handle without taking ownership (interop with a framework's stream).
  virtual std::unique_ptr<StreamImpl> wrap_stream(int device, void* native_handle) = 0;
  virtual std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) = 0;
  virtual std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) = 0;
  virtual std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                           const MarkerOptions& options) = 0;
};

}  // namespace accgraph
