// CUDA streams: non-blocking owned streams or wrapped (non-owning) cudaStream_t handles, with the
// portable copy/fill, host calls, delays and fork/join through events.
#include <exception>

#include <fmt/format.h>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

namespace {

// Keeps a host call's std::function alive for as long as CUDA may call it. Eager calls run once
// and delete themselves; captured calls are owned by a CUDA user object retained by the graph,
// so they live exactly as long as the graph and every executable made from it.
struct HostCall {
  std::function<void()> fn;
};

void run_host_call(HostCall& call) noexcept {
  try {
    call.fn();
  } catch (const std::exception& e) {
    log(LogLevel::Error, fmt::format("cuda: a host_call threw (exceptions cannot cross the "
                                     "stream; handle them inside the callable): {}",
                                     e.what()));
  } catch (...) {
    log(LogLevel::Error, "cuda: a host_call threw a non-std exception");
  }
}

void CUDART_CB run_once(void* data) {
  auto* call = static_cast<HostCall*>(data);
  run_host_call(*call);
  delete call;
}

void CUDART_CB run_captured(void* data) { run_host_call(*static_cast<HostCall*>(data)); }

void CUDART_CB destroy_captured(void* data) { delete static_cast<HostCall*>(data); }

}  // namespace

CudaStream::CudaStream(int device, cudaStream_t stream, Ownership ownership)
    : device_(device), stream_(stream), ownership_(ownership) {}

CudaStream::~CudaStream() {
  if (order_event_ != nullptr) ACCGRAPH_CUDA_LOG(cudaEventDestroy(order_event_), "destroying a stream's event");
  // A wrapped stream belongs to its creator (a framework): never destroyed here.
  if (ownership_ == Ownership::Owned) ACCGRAPH_CUDA_LOG(cudaStreamDestroy(stream_), "destroying a stream");
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
  auto call = std::make_unique<HostCall>(HostCall{std::move(fn)});
  if (status != cudaStreamCaptureStatusActive) {
    ACCGRAPH_CUDA_CHECK(cudaLaunchHostFunc(stream_, &run_once, call.get()), "host_call");
    call.release();  // run_once deletes it
    return;
  }
  HostCall* raw = call.get();
  cudaUserObject_t object = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaUserObjectCreate(&object, raw, &destroy_captured, 1,
                                           cudaUserObjectNoDestructorSync),
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
  ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronize");
}

bool CudaStream::is_capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream_, &status);
  // The legacy stream answers "implicitly captured" while another stream captures in Global
  // mode: it is not capturing itself.
  if (err == cudaErrorStreamCaptureImplicit && is_legacy_default()) {
    (void)cudaGetLastError();
    return false;
  }
  if (err != cudaSuccess) throw_cuda_error(err, "cudaStreamIsCapturing", "reading the capture state");
  // An invalidated capture still has to be ended: report it as capturing.
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace accgraph::detail::cuda
