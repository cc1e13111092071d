// CUDA streams: non-blocking owned streams or wrapped (non-owning) cudaStream_t handles, with the
// portable copy/fill, host calls, delays and fork/join through events.
#include <exception>
#include <optional>

#include <cuda.h>  // cuStreamIsCapturing's types (Note [Driver capture query])
#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_graph.hpp"
#include "cuda_kernels.hpp"
#include "cuda_stream.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

// Keeps a host call's std::function alive for as long as CUDA may call it. Eager calls run once
// and delete themselves; captured calls are owned by a CUDA user object retained by the graph,
// so they live exactly as long as the graph and every executable made from it. Note [CUDA
// failures]: what the callable throws goes to `sink` (nullptr: a capture accgraph did not
// begin, logged instead).
struct HostCall {
  std::function<void()> fn;
  std::shared_ptr<FailureSink> sink;
  const char* operation;
};

void run_host_call(HostCall& call) noexcept {
  try {
    call.fn();
  } catch (...) {
    if (call.sink) {
      call.sink->failures.record_current_exception(call.operation);
      return;
    }
    try {
      throw;
    } catch (const std::exception& e) {
      log(LogLevel::Error, fmt::format("cuda: a {} in a capture accgraph did not begin threw, "
                                       "and no stream can report it: {}",
                                       call.operation, e.what()));
    } catch (...) {
      log(LogLevel::Error, fmt::format("cuda: a {} in a capture accgraph did not begin threw "
                                       "a non-std exception",
                                       call.operation));
    }
  }
}

void CUDART_CB run_once(void* data) {
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(data));
  run_host_call(*call);
  call->sink->pending.fetch_sub(1, std::memory_order_acq_rel);  // after the failure is recorded
}

void CUDART_CB run_captured(void* data) { run_host_call(*static_cast<HostCall*>(data)); }

void CUDART_CB destroy_captured(void* data) { delete static_cast<HostCall*>(data); }

std::mutex sinks_mutex;
std::unordered_map<cudaGraph_t, std::shared_ptr<FailureSink>> sinks;

}  // namespace

std::shared_ptr<FailureSink> capture_sink(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(sinks_mutex);
  auto it = sinks.find(graph);
  return it == sinks.end() ? nullptr : it->second;
}

void register_capture_sink(cudaGraph_t graph, std::shared_ptr<FailureSink> sink) {
  std::lock_guard<std::mutex> lock(sinks_mutex);
  sinks[graph] = std::move(sink);
}

void unregister_capture_sink(cudaGraph_t graph) noexcept {
  std::lock_guard<std::mutex> lock(sinks_mutex);
  sinks.erase(graph);
}

CudaStream::CudaStream(int device, cudaStream_t stream, Ownership ownership)
    : device_(device),
      stream_(stream),
      ownership_(ownership),
      capture_hint_(ownership == Ownership::Borrowed ? 1 : 0) {}

CudaStream::~CudaStream() {
  // Note [Teardown during a capture]
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  // Note [CUDA failures]: a failure is never dropped. Host calls still pending record into the
  // sink after we are gone, so wait for them (only then: destroying a stream does not wait).
  if (failures_->pending.load(std::memory_order_acquire) > 0) {
    DeviceGuard guard(device_);
    ACCGRAPH_CUDA_LOG(cudaStreamSynchronize(stream_),
                      "destroying a stream: waiting for its pending host calls");
  }
  failures_->failures.log_if_any(kBackendName, describe_queue(kBackendName, stream_));
  if (order_event_ != nullptr)
    ACCGRAPH_CUDA_LOG(cudaEventDestroy(order_event_), "destroying a stream's event");
  // A wrapped stream belongs to its creator (a framework): never destroyed here.
  if (ownership_ == Ownership::Owned)
    ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "destroying a stream");
}

bool CudaStream::is_legacy_default() const noexcept {
  return stream_ == nullptr || stream_ == cudaStreamLegacy;
}

void CudaStream::copy(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  ACCGRAPH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                      fmt::format("copy of {} bytes", bytes));
}

void CudaStream::fill(void* dst, uint8_t value, size_t bytes) {
  DeviceGuard guard(device_);
  ACCGRAPH_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_),
                      fmt::format("fill of {} bytes", bytes));
}

void CudaStream::host_call(std::function<void()> fn) {
  DeviceGuard guard(device_);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph),
                      "host_call: reading the stream's capture state");
  if (status != cudaStreamCaptureStatusActive) {
    auto call = std::make_unique<HostCall>(HostCall{std::move(fn), failures_, "host_call"});
    failures_->pending.fetch_add(1, std::memory_order_acq_rel);
    cudaError_t err = cudaLaunchHostFunc(stream_, &run_once, call.get());
    if (err != cudaSuccess) {
      failures_->pending.fetch_sub(1, std::memory_order_acq_rel);
      throw_cuda_error(err, "cudaLaunchHostFunc", "host_call");
    }
    call.release();  // run_once deletes it
    return;
  }
  std::shared_ptr<FailureSink> sink = capture_sink(graph);
  if (sink) sink->has_host_nodes.store(true, std::memory_order_release);
  auto call = std::make_unique<HostCall>(
      HostCall{std::move(fn), std::move(sink), "host_call (a node of a replayed graph)"});
  HostCall* raw = call.get();
  cudaUserObject_t object = nullptr;
  ACCGRAPH_CUDA_CHECK(
      cudaUserObjectCreate(&object, raw, &destroy_captured, 1, cudaUserObjectNoDestructorSync),
      "host_call: keeping the callable alive with the graph");
  call.release();  // owned by the user object now
  cudaError_t err = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (err != cudaSuccess) {
    ACCGRAPH_CUDA_LOG(cudaUserObjectRelease(object, 1), "host_call: dropping the callable");
    throw_cuda_error(err, "cudaGraphRetainUserObject",
                     "host_call: keeping the callable alive with the graph");
  }
  ACCGRAPH_CUDA_CHECK(cudaLaunchHostFunc(stream_, &run_captured, raw), "host_call");
}

void CudaStream::delay(std::chrono::nanoseconds duration) {
  DeviceGuard guard(device_);
  ACCGRAPH_CUDA_CHECK(launch_spin(stream_, static_cast<uint64_t>(duration.count())),
                      fmt::format("delay of {} ns", duration.count()));
}

cudaEvent_t CudaStream::order_event() {
  if (order_event_ == nullptr) {
    DeviceGuard guard(device_);
    RelaxedCaptureModeGuard relaxed;  // may be first needed inside a capture (a fork)
    ACCGRAPH_CUDA_CHECK(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming),
                        "creating an ordering event");
  }
  return order_event_;
}

void CudaStream::wait_for(StreamImpl& other_impl) {
  CudaStream& other = as_cuda_stream(other_impl, "wait");
  if (other.capture_hint() & 1) note_capture();  // a fork may make this stream capture
  // Record on `other`, wait here: during a capture on `other` this forks the capture onto this
  // stream; the origin waiting on a forked stream joins it back (CUDA's capture rules).
  cudaEvent_t event = other.order_event();
  {
    DeviceGuard guard(other.device_);
    ACCGRAPH_CUDA_CHECK(cudaEventRecord(event, other.stream_), "wait: recording the event");
  }
  DeviceGuard guard(device_);
  ACCGRAPH_CUDA_CHECK(cudaStreamWaitEvent(stream_, event, 0), "wait: waiting for the event");
}

void CudaStream::synchronize() {
  DeviceGuard guard(device_);
  {
    // Note [Capture-mode rules]: an owned stream is non-blocking and accgraph's own (the marker
    // overhead's capture waits on one): waiting for it is no part of a capture another thread
    // runs in Global mode, which would refuse the wait and be invalidated by it. A wrapped
    // stream keeps the thread's mode: it may be the legacy stream, which a capture does involve.
    std::optional<RelaxedCaptureModeGuard> relaxed;
    if (ownership_ == Ownership::Owned) relaxed.emplace();
    ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronize");
  }
  failures_->failures.throw_if_any(kBackendName, describe_queue(kBackendName, stream_));
}

// Note [Driver capture query]: a timed replay on a stream whose native handle was handed out
// asks whether it captures on every launch (Note [Native captures] in
// core/seam/stream_state.hpp). The runtime's cudaStreamIsCapturing cost 57-100 ns per call on
// the H100, its driver function cuStreamIsCapturing 13-37 ns (accgraph-bench-cuda (q):
// bench/README.md, 'Targets and figures the code cites'): most of the runtime's cost is its own
// per-call bookkeeping. So is_capturing() calls the driver's function through the runtime's entry
// point (no link to libcuda: the runtime loaded it), resolved once when the backend starts, and
// falls back to the runtime's query whenever the driver's does not answer plainly: not resolved (a
// runtime before CUDA 12.5), or any error (an implicitly captured legacy stream, no current context
// for the legacy stream, a bad handle), so that every answer and every error is the runtime's as
// before. The driver's CUstream is the runtime's cudaStream_t (and its special handles the same
// values), and its capture statuses are the runtime's.
namespace {
using DriverStreamIsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);

DriverStreamIsCapturing driver_capture_query() noexcept {
  static const DriverStreamIsCapturing query = []() -> DriverStreamIsCapturing {
#if CUDART_VERSION >= 12050
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    // cuStreamIsCapturing's ABI since CUDA 10.0.
    if (cudaGetDriverEntryPointByVersion("cuStreamIsCapturing", &entry, 10000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not sticky: the runtime's query is used instead
      return nullptr;
    }
    return reinterpret_cast<DriverStreamIsCapturing>(entry);
#else
    return nullptr;
#endif
  }();
  return query;
}
}  // namespace

void resolve_driver_capture_query() noexcept { (void)driver_capture_query(); }

bool CudaStream::is_capturing() const {
  if (DriverStreamIsCapturing query = driver_capture_query()) {  // Note [Driver capture query]
    CUstreamCaptureStatus driver_status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (query(stream_, &driver_status) == CUDA_SUCCESS)
      return driver_status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream_, &status);
  // The legacy stream answers "implicitly captured" while another stream captures in Global
  // mode: it is not capturing itself.
  if (err == cudaErrorStreamCaptureImplicit && is_legacy_default()) {
    (void)cudaGetLastError();
    return false;
  }
  if (err != cudaSuccess)
    throw_cuda_error(err, "cudaStreamIsCapturing", "reading the capture state");
  // An invalidated capture still has to be ended: report it as capturing.
  return status != cudaStreamCaptureStatusNone;
}

// Note [CUDA capture tail]: (capture.tail) in accgraph/spi/capture_tail.hpp on CUDA. While a
// stream captures, cudaStreamGetCaptureInfo names the set of nodes the next captured operation
// on it will depend on: every operation captured on the stream (accgraph's or a framework's on
// the same cudaStream_t) becomes a new node and replaces that set by itself, and a join (a wait
// on an event recorded on another capturing stream) adds that stream's nodes. A marker is a link
// of its stream's chain like any kernel while the capture runs (Note [Exact marker placement] in
// capture_helpers.cpp). So the set changes exactly when something was enqueued (or joined), and
// the token names the set:
// - one node: its handle, XOR the capture id shifted into the top 16 bits (node handles are host
//   pointers, unique among live nodes of one capture; the id tells two captures apart should a
//   handle be reused). Within one capture the XOR with a constant keeps distinct nodes distinct.
// - several nodes (after a join): a 64-bit mix of the capture id and the handles, independent of
//   their order. Two different sets share a token with probability about 2^-64 (then one
//   boundary would share a marker wrongly).
// Any other answer gives 0: not capturing (or an invalidated capture), an empty set (nothing
// captured on the stream yet), the call failing. One runtime call, no device switch (the query
// takes the stream itself), nothing enqueued.
namespace {
uint64_t mix64(uint64_t x) noexcept {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t CudaStream::capture_tail() const noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  const cudaGraphNode_t* nodes = nullptr;
  // Asked for although unused: without it, non-default edge data on a dependency (a
  // programmatic edge) makes the query fail with cudaErrorLossyQuery.
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
  cudaError_t err =
      cudaStreamGetCaptureInfo(stream_, &status, &id, nullptr, &nodes, &edges, &count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky (e.g. the legacy stream beside a global capture)
    return 0;
  }
  if (status != cudaStreamCaptureStatusActive || count == 0 || nodes == nullptr) return 0;
  if (count == 1) return reinterpret_cast<uint64_t>(nodes[0]) ^ (static_cast<uint64_t>(id) << 48);
  uint64_t sum = 0;  // order-independent: a set
  for (size_t i = 0; i < count; ++i) sum += mix64(reinterpret_cast<uint64_t>(nodes[i]));
  const uint64_t token = mix64(sum ^ mix64(static_cast<uint64_t>(id) + count));
  return token != 0 ? token : 1;
}

}  // namespace accgraph::detail::cuda
