// CUDA graphs: stream capture (Global/ThreadLocal/Relaxed) into a cudaGraph_t, instantiation
// with upload and auto-free-on-launch, update in place on re-capture, replay on any stream of the
// device, DOT dumps, and the graph pools of Note [Graph pools].
#include <algorithm>
#include <exception>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_graph.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

// --- capture contexts (which pool the capturing thread's allocations use) -------------------

namespace {
std::mutex contexts_mutex;
std::map<std::thread::id, std::vector<std::shared_ptr<CaptureContext>>> contexts;
}  // namespace

std::shared_ptr<CaptureContext> current_capture_context() {
  std::lock_guard<std::mutex> lock(contexts_mutex);
  auto it = contexts.find(std::this_thread::get_id());
  if (it == contexts.end() || it->second.empty()) return nullptr;
  return it->second.back();
}

void push_capture_context(std::thread::id thread, std::shared_ptr<CaptureContext> context) {
  std::lock_guard<std::mutex> lock(contexts_mutex);
  contexts[thread].push_back(std::move(context));
}

void pop_capture_context(std::thread::id thread, const CaptureContext* context) noexcept {
  std::lock_guard<std::mutex> lock(contexts_mutex);
  auto it = contexts.find(thread);
  if (it == contexts.end()) return;
  auto& stack = it->second;
  stack.erase(
      std::remove_if(stack.begin(), stack.end(), [&](const auto& c) { return c.get() == context; }),
      stack.end());
  if (stack.empty()) contexts.erase(it);
}

// --- pools -----------------------------------------------------------------------------------

PoolState::~PoolState() {
  if (pool == nullptr) return;
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  ACCGRAPH_CUDA_LOG(cudaMemPoolDestroy(pool), "destroying a graph pool");
}

namespace {

// A pool of the device's memory for the graph's stream-ordered allocations (Note [Pool
// sharing] in accgraph/spi/pool_table.hpp); with an id from another graph, that graph's pool, which
// must be on the same device.
std::shared_ptr<PoolState> acquire_pool(Pools& pools, PoolId id, int device) {
  std::shared_ptr<PoolState> state = pools.acquire(id, [device](PoolId new_id) {
    auto created = std::make_shared<PoolState>();
    created->id = new_id;
    created->device = device;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    ACCGRAPH_CUDA_CHECK(cudaMemPoolCreate(&created->pool, &props),
                        "capture_begin: creating the graph pool");
    return created;
  });
  if (state->device != device)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("capture_begin: graph pool {{{}, {}}} belongs to device {} but the "
                            "capture is on device {}: share pools only between graphs of one "
                            "device",
                            id.first, id.second, state->device, device),
                kBackendName);
  return state;
}

}  // namespace

// --- CudaGraph -------------------------------------------------------------------------------

CudaGraph::CudaGraph(Pools& pools, const GraphArgs& args) : pools_(pools), args_(args) {}

CudaGraph::~CudaGraph() {
  if (capturing_) end_capture_noexcept();
  end_orphaned_capture_noexcept();
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  release_allocations();
  drop_template();
  destroy_executable(exec_);
  destroy_executable(reusable_exec_);
  if (forwarded_ != nullptr)
    ACCGRAPH_CUDA_LOG(cudaEventDestroy(forwarded_), "destroying a graph's event");
}

void CudaGraph::capture_begin(StreamImpl& stream_impl, PoolId pool, CaptureMode mode) {
  CudaStream& stream = as_cuda_stream(stream_impl, "capture_begin");
  if (stream.is_legacy_default())
    throw Error(ErrorCode::InvalidArgument,
                "capture_begin: cannot capture on the legacy default stream (a wrapped nullptr "
                "or cudaStreamLegacy): CUDA does not capture it, because it synchronises with "
                "every blocking stream; capture on a stream from Stream::create(\"cuda\") or a "
                "wrapped non-default cudaStream_t (replaying on the default stream afterwards "
                "is fine)",
                kBackendName);
  end_orphaned_capture_noexcept();
  DeviceGuard guard(stream.device());
  std::shared_ptr<PoolState> pool_state;
  {
    // Another capture in Global mode on this thread (fork-join.refused begins two) would
    // refuse cudaMemPoolCreate: the backend's own set-up is not part of any capture.
    RelaxedCaptureModeGuard relaxed;
    pool_state = acquire_pool(pools_, pool, stream.device());
  }
  stream.note_capture();
  ACCGRAPH_CUDA_CHECK(cudaStreamBeginCapture(stream.handle(), to_cuda(mode)), "capture_begin");
  pool_ = std::move(pool_state);
  last_pool_id_ = pool_->id;
  capture_stream_ = &stream;
  device_ = stream.device();
  mode_ = mode;
  capturing_ = true;
  capture_thread_ = std::this_thread::get_id();
  allocations_ = std::make_shared<GraphAllocations>();
  context_ = std::make_shared<CaptureContext>();
  context_->device = device_;
  context_->stream = stream.handle();
  context_->pool = pool_;
  context_->allocations = allocations_;
  push_capture_context(capture_thread_, context_);
  // Note [CUDA failures]: host nodes captured from any stream of this capture record here.
  node_failures_ = std::make_shared<FailureSink>();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t building = nullptr;
  cudaError_t err = cudaStreamGetCaptureInfo(stream.handle(), &status, nullptr, &building);
  if (err != cudaSuccess) {
    end_capture_noexcept();
    pool_.reset();
    throw_cuda_error(err, "cudaStreamGetCaptureInfo", "capture_begin: reading the new capture");
  }
  capture_graph_ = building;
  register_capture_sink(capture_graph_, node_failures_);
}

void CudaGraph::finish_capture_state() noexcept {
  if (capture_graph_ != nullptr) unregister_capture_sink(capture_graph_);
  capture_graph_ = nullptr;
  if (context_) pop_capture_context(capture_thread_, context_.get());
  context_.reset();
  capturing_ = false;
}

void CudaGraph::capture_end() {
  cudaStream_t stream = capture_stream_->handle();
  cudaGraph_t graph = nullptr;
  cudaError_t err;
  {
    DeviceGuard guard(device_);
    err = cudaStreamEndCapture(stream, &graph);
  }
  if (err == cudaErrorStreamCaptureWrongThread) {
    // The capture goes on: only the thread that began it may end it.
    orphaned_capture_ = stream;
    orphaned_thread_ = capture_thread_;
    finish_capture_state();
    pool_.reset();
    throw_cuda_error(err, "cudaStreamEndCapture",
                     "capture_end (the stream stays capturing until reset() or a new "
                     "capture_begin runs on the thread that began the capture)");
  }
  finish_capture_state();
  if (err != cudaSuccess) {
    if (graph != nullptr) ACCGRAPH_CUDA_LOG(cudaGraphDestroy(graph), "dropping a failed capture");
    allocations_.reset();
    pool_.reset();
    throw_cuda_error(err, "cudaStreamEndCapture", "capture_end");
  }
  graph_ = graph;
  upload_stream_ = stream;
  try {
    scan_template();
  } catch (...) {
    reset();
    throw;
  }
}

void CudaGraph::scan_template() {
  const std::vector<cudaGraphNode_t> nodes = graph_nodes(graph_, "capture_end");
  nodes_ = nodes.size();
  has_allocations_ = false;
  has_event_records_ = false;
  has_marker_kernels_ = false;
  event_nodes_.clear();
  std::vector<void*> allocated;
  std::set<void*> freed;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ACCGRAPH_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "capture_end: reading a node's type");
    if (type == cudaGraphNodeTypeMemAlloc) {
      cudaMemAllocNodeParams params{};
      ACCGRAPH_CUDA_CHECK(cudaGraphMemAllocNodeGetParams(node, &params),
                          "capture_end: reading an allocation node");
      allocated.push_back(params.dptr);
    } else if (type == cudaGraphNodeTypeMemFree) {
      void* dptr = nullptr;
      ACCGRAPH_CUDA_CHECK(cudaGraphMemFreeNodeGetParams(node, &dptr),
                          "capture_end: reading a free node");
      freed.insert(dptr);
    } else if (type == cudaGraphNodeTypeKernel && !has_marker_kernels_) {
      has_marker_kernels_ = is_marker_kernel_node(node);
    } else if (type == cudaGraphNodeTypeEventRecord) {
      cudaEvent_t event = nullptr;
      ACCGRAPH_CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(node, &event),
                          "capture_end: reading an event record node");
      event_nodes_[event] = node;
      has_event_records_ = true;
    }
  }
  // Allocations the graph does not free itself stay allocated after each launch (and are freed
  // by the next launch, cudaGraphInstantiateFlagAutoFreeOnLaunch); the graph frees the last
  // ones on reset or destruction.
  std::lock_guard<std::mutex> lock(allocations_->mutex);
  allocations_->pointers.clear();
  for (void* p : allocated) {
    if (freed.count(p) == 0) allocations_->pointers.push_back(p);
  }
  has_allocations_ = !allocated.empty();
}

void CudaGraph::instantiate() {
  DeviceGuard guard(device_);
  // The first replay may instantiate while another stream of this thread captures (a nested
  // replay, Note [Nested replay]): instantiation and upload are not part of that capture.
  RelaxedCaptureModeGuard relaxed;
  cudaStream_t upload = args_.keep_graph ? nullptr : upload_stream_;
  upload_stream_ = nullptr;
  // Update in place when the previous executable has the same topology (cudaGraphExecUpdate
  // refuses memory nodes; event record nodes are re-bound by the markers, so those re-instantiate).
  if (reusable_exec_ != nullptr && !has_allocations_ && !has_event_records_) {
    cudaGraphExecUpdateResultInfo info{};
    cudaError_t err = cudaGraphExecUpdate(reusable_exec_, graph_, &info);
    if (err == cudaSuccess) {
      exec_ = reusable_exec_;
      reusable_exec_ = nullptr;
      ++updates_;
      ++generation_;
      if (upload != nullptr)
        ACCGRAPH_CUDA_CHECK(cudaGraphUpload(exec_, upload),
                            "instantiate: uploading the updated graph");
      if (!args_.keep_graph && !debug_ && !has_marker_kernels_) drop_template();
      return;
    }
    (void)cudaGetLastError();  // the topology changed: build a new executable instead
  }
  destroy_executable(reusable_exec_);
  cudaGraphInstantiateParams params{};
  params.flags = 0;
  if (upload != nullptr) {
    params.flags |= cudaGraphInstantiateFlagUpload;
    params.uploadStream = upload;
  }
  if (has_allocations_) params.flags |= cudaGraphInstantiateFlagAutoFreeOnLaunch;
  cudaError_t err = cudaGraphInstantiateWithParams(&exec_, graph_, &params);
  if (err != cudaSuccess)
    throw_cuda_error(err, "cudaGraphInstantiateWithParams",
                     fmt::format("instantiate (result {}, {} nodes)",
                                 static_cast<int>(params.result_out), nodes_));
  ++instantiations_;
  ++generation_;
  // The template is only needed later for debug_dump, keep_graph, and the external-event
  // markers, which re-bind its event record nodes on each launch.
  // Note [CUDA untimed replays]: and for the untimed executable of a timed graph.
  if (!args_.keep_graph && !debug_ && !has_event_records_ && !has_marker_kernels_)
    drop_template();
}

void CudaGraph::replay(StreamImpl& stream_impl) {
  // The core checked that the stream is a cuda stream of the capture device.
  auto& stream = static_cast<CudaStream&>(stream_impl);
  if (exec_ == nullptr)
    throw Error(ErrorCode::InvalidState, "replay: the graph has no executable: instantiate first",
                kBackendName);
  // Note [CUDA untimed replays]: after an untimed launch on another stream, wait for it.
  untimed_.order_before(stream.handle());
  launch(stream, exec_);
}

// Note [CUDA untimed replays]: sampled timing (Note [Sampled replays] in spi/untimed_replay.hpp)
// launches most replays of a timed graph without its markers. The markers are kernel nodes of
// the device-timestamp set (is_marker_kernel), and exact placement gave every user edge back
// (Note [Exact marker placement]), so the untimed executable is the template's clone with the
// marker kernels destroyed, plus an ordinary edge P -> S wherever a marker was the only path
// from a node P to a node S (chained markers, the sequence's tail): every order among the
// user's work stays, and no edge is added where one already orders it (an extra edge into a
// PDL kernel would take its overlap away). It is built at the first untimed launch of each
// executable generation, from the template that a graph with marker kernels keeps; never for a
// graph with memory nodes (CUDA allows one live executable of it) or event record nodes (the
// external-events markers re-bind them per launch): those time every replay. Two executables
// are not ordered by CUDA as launches of one are (graph.serial), so an untimed launch runs only
// on the stream of the launch before it (stream order does it), and a timed launch on another
// stream than the last untimed one waits for that one's event, recorded after each untimed
// launch.
bool CudaGraph::can_replay_untimed(const StreamImpl& stream) const noexcept {
  if (exec_ == nullptr || !has_marker_kernels_ || has_allocations_ || has_event_records_)
    return false;
  if (untimed_.exec() == nullptr || untimed_generation_ != generation_) {
    if (graph_ == nullptr) return false;  // the template is gone: nothing to build it from
  }
  const auto& cuda_stream = static_cast<const CudaStream&>(stream);
  return !launched_any_ || cuda_stream.handle() == last_launch_stream_;
}

void CudaGraph::replay_untimed(StreamImpl& stream_impl) {
  auto& stream = static_cast<CudaStream&>(stream_impl);
  if (untimed_.exec() == nullptr || untimed_generation_ != generation_) {
    if (graph_ == nullptr)
      throw Error(ErrorCode::InvalidState,
                  "replay: the graph's template is gone, so no untimed executable can be built: "
                  "this is an accgraph bug (can_replay_untimed said yes): please report it",
                  kBackendName);
    untimed_.set_device(device_);
    untimed_.build(graph_);
    untimed_generation_ = generation_;
  }
  launch(stream, untimed_.exec());
  untimed_.after_launch(stream.handle());
}

void CudaGraph::launch(CudaStream& stream, cudaGraphExec_t exec) {
  // Note [Nested replay]: CUDA cannot record a launch of an executable into another capture
  // (cudaGraphLaunch fails with cudaErrorStreamCaptureUnsupported and invalidates that capture),
  // so the replay is refused before it reaches CUDA and the outer capture goes on.
  //
  // Note [Capture check on replay]: asking CUDA costs about 0.1 us, 5% of a replay's host time,
  // so it is asked only of a stream that may be capturing (CudaStream::capture_hint), and an
  // owned stream found not capturing is not asked again until it may be.
  if (const uint64_t hint = stream.capture_hint(); hint & 1) {
    if (!stream.is_capturing())
      stream.note_not_capturing(hint);
    else
      throw Error(ErrorCode::Unsupported,
                  "replay: the stream is capturing: CUDA cannot record a graph's replay into "
                  "another capture (cudaGraphLaunch would invalidate it); replay after that "
                  "capture ends, or capture the graph's work itself into it",
                  kBackendName);
  }
  // Note [CUDA failures]: the previous replay's failure is on its stream before this one runs.
  bool forwards = node_failures_ && node_failures_->has_host_nodes.load(std::memory_order_acquire);
  if (forwards && forwarded_recorded_)
    ACCGRAPH_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), forwarded_, 0),
                        "replay: waiting for the previous replay's failure report");
  cudaError_t err = cudaGraphLaunch(exec, stream.handle());
  if (err != cudaSuccess) throw_cuda_error(err, "cudaGraphLaunch", "replay");
  launched_ = true;
  launched_any_ = true;
  last_launch_stream_ = stream.handle();
  if (forwards) forward_failures(stream);
}

void CudaGraph::forward_failures(CudaStream& stream) {
  stream.host_call([sink = node_failures_] {
    if (std::optional<FirstFailure::Failure> failure = sink->failures.take())
      throw OperationFailure(failure->operation, failure->message);
  });
  DeviceGuard guard(device_);
  if (forwarded_ == nullptr)
    ACCGRAPH_CUDA_CHECK(cudaEventCreateWithFlags(&forwarded_, cudaEventDisableTiming),
                        "replay: creating the failure-report event");
  ACCGRAPH_CUDA_CHECK(cudaEventRecord(forwarded_, stream.handle()),
                      "replay: recording the failure-report event");
  forwarded_recorded_ = true;
}

void CudaGraph::reset() {
  if (capturing_) end_capture_noexcept();
  end_orphaned_capture_noexcept();
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  release_allocations();
  drop_template();
  if (exec_ != nullptr) {
    if (has_allocations_) {
      destroy_executable(exec_);
    } else {
      // Kept so that the next capture can update it in place (Capabilities::graph_update).
      destroy_executable(reusable_exec_);
      reusable_exec_ = exec_;
      exec_ = nullptr;
    }
  }
  pool_.reset();
  allocations_.reset();
  has_allocations_ = false;
  has_event_records_ = false;
  has_marker_kernels_ = false;
  event_nodes_.clear();
  launched_ = false;
  nodes_ = 0;
  untimed_.destroy();
  upload_stream_ = nullptr;
}

PoolId CudaGraph::pool() const { return pool_ ? pool_->id : last_pool_id_; }

void CudaGraph::debug_dump(const std::string& path) {
  if (graph_ == nullptr)
    throw Error(ErrorCode::InvalidState,
                "debug_dump: the captured graph was dropped after instantiation: call "
                "enable_debug_mode() (or create the graph with GraphArgs::keep_graph) before "
                "capture_begin",
                kBackendName);
  ACCGRAPH_CUDA_CHECK(cudaGraphDebugDotPrint(graph_, path.c_str(), cudaGraphDebugDotFlagsVerbose),
                      fmt::format("debug_dump to '{}'", path));
}

GraphStats CudaGraph::stats() const {
  GraphStats s;
  s.nodes = nodes_;
  s.instantiations = instantiations_;
  s.updates = updates_;
  return s;
}

cudaGraphNode_t CudaGraph::event_record_node(cudaEvent_t event) const {
  auto it = event_nodes_.find(event);
  return it == event_nodes_.end() ? nullptr : it->second;
}

void CudaGraph::end_capture_noexcept() noexcept {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(capture_stream_->handle(), &graph);
  if (err == cudaErrorStreamCaptureWrongThread) {
    orphaned_capture_ = capture_stream_->handle();
    orphaned_thread_ = capture_thread_;
    NativeCall<CudaCall>::log_failure(
        err, "cudaStreamEndCapture",
        "aborting a capture from another thread than the one that began it (the stream stays "
        "capturing until reset() runs on that thread)");
  } else if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an invalidated capture: ending it was the point
  }
  if (graph != nullptr) ACCGRAPH_CUDA_LOG(cudaGraphDestroy(graph), "dropping an aborted capture");
  finish_capture_state();
}

void CudaGraph::end_orphaned_capture_noexcept() noexcept {
  if (orphaned_capture_ == nullptr || orphaned_thread_ != std::this_thread::get_id()) return;
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(orphaned_capture_, &graph);
  if (err != cudaSuccess) (void)cudaGetLastError();
  if (graph != nullptr) ACCGRAPH_CUDA_LOG(cudaGraphDestroy(graph), "dropping an abandoned capture");
  orphaned_capture_ = nullptr;
}

void CudaGraph::release_allocations() noexcept {
  if (!allocations_) return;
  std::lock_guard<std::mutex> lock(allocations_->mutex);
  if (launched_ && !allocations_->pointers.empty()) {
    // The last launch's allocations are still live: free them once the device is done.
    ACCGRAPH_CUDA_LOG(cudaSetDevice(device_), "freeing graph allocations");
    ACCGRAPH_CUDA_LOG(cudaDeviceSynchronize(), "freeing graph allocations");
    // cudaFreeAsync rather than cudaFree: both are documented for graph allocations, but
    // compute-sanitizer's leak check (CUDA 13.0) only sees the stream-ordered free of memory a
    // graph launch allocated, and reports a cudaFree'd one as leaked at exit.
    for (void* p : allocations_->pointers)
      ACCGRAPH_CUDA_LOG(cudaFreeAsync(p, cudaStreamLegacy), "freeing graph allocations");
    ACCGRAPH_CUDA_LOG(cudaStreamSynchronize(cudaStreamLegacy), "freeing graph allocations");
  }
  allocations_->pointers.clear();
  allocations_->freed = true;
}

void CudaGraph::destroy_executable(cudaGraphExec_t& exec) noexcept {
  if (exec == nullptr) return;
  // A launch still in flight finishes first: CUDA frees the executable asynchronously.
  ACCGRAPH_CUDA_LOG(cudaGraphExecDestroy(exec), "destroying an executable graph");
  exec = nullptr;
}

void CudaGraph::drop_template() noexcept {
  if (graph_ == nullptr) return;
  ACCGRAPH_CUDA_LOG(cudaGraphDestroy(graph_), "destroying a captured graph");
  graph_ = nullptr;
}

}  // namespace accgraph::detail::cuda
