// Turns failed CUDA runtime calls into accgraph errors with the call, the code name and a hint.
#include "cuda_check.hpp"

#include <cstring>

#include <fmt/format.h>

namespace accgraph::detail::cuda {

const char* error_hint(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorStreamCaptureUnsupported:
      return "this operation is not permitted while a stream is capturing (synchronous calls "
             "such as cudaMalloc, cudaMallocHost, cudaMemcpy or synchronize, and, in Global "
             "mode, such calls from any thread): end the capture first, make the call before "
             "capture_begin, or capture with CaptureMode::Relaxed (or ThreadLocal when the call "
             "comes from another thread)";
    case cudaErrorStreamCaptureInvalidated:
      return "the capture was invalidated by an earlier error or forbidden call during it (see "
             "the first error reported); the graph was reset: fix that call and capture again";
    case cudaErrorStreamCaptureUnjoined:
      return "a stream forked from the capture was not joined back: call origin.wait(forked) for "
             "every forked stream before capture_end";
    case cudaErrorStreamCaptureWrongThread:
      return "the capture must be ended on the thread that began it (CaptureMode Global or "
             "ThreadLocal): call capture_end (or reset) on that thread, or capture with "
             "CaptureMode::Relaxed";
    case cudaErrorStreamCaptureIsolation:
      return "the capture depends on work outside it (an event recorded before capture_begin): "
             "record the event inside the capture or drop the dependency";
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
      return "streams of two different captures were joined: fork only streams that joined "
             "this capture";
    case cudaErrorStreamCaptureImplicit:
      return "the legacy default stream was used while capturing: use streams created by "
             "Stream::create(\"cuda\") (non-blocking)";
    case cudaErrorInsufficientDriver:
      return "the NVIDIA driver is older than the CUDA runtime: update the driver";
    case cudaErrorNoKernelImageForDevice:
      return "accgraph was not built for this GPU's architecture: rebuild with "
             "ACCGRAPH_CUDA_ARCHITECTURES including it";
    case cudaErrorMemoryAllocation:
      return "the device is out of memory: free memory or allocate less";
    default:
      return "";
  }
}

std::string cuda_error_message(cudaError_t err, const char* call, const std::string& what) {
  const char* hint = error_hint(err);
  return fmt::format("{}: {} failed: {} ({}){}{}", what, call, cudaGetErrorName(err),
                     cudaGetErrorString(err), hint[0] ? "; " : "", hint);
}

namespace {
// "cudaStreamEndCapture(stream_, &graph)" -> "cudaStreamEndCapture"
std::string call_name(const char* call) {
  const char* paren = std::strchr(call, '(');
  return paren ? std::string(call, paren) : std::string(call);
}
}  // namespace

// Capture misuse (unjoined forks, the wrong thread, forbidden calls while capturing) is a call in
// the wrong order, as the core's own checks call it: InvalidState, with the native code kept.
ErrorCode error_code_for(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureImplicit:
      return ErrorCode::InvalidState;
    default:
      return ErrorCode::BackendError;
  }
}

void throw_cuda_error(cudaError_t err, const char* call, const std::string& what) {
  (void)cudaGetLastError();  // a non-sticky error must not resurface in the next check
  std::string name = call_name(call);
  throw Error(error_code_for(err), cuda_error_message(err, name.c_str(), what), "cuda", name,
              cudaGetErrorName(err));
}

void check_noexcept(cudaError_t err, const char* call, const char* what) noexcept {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  try {
    log(LogLevel::Warning, "cuda: " + cuda_error_message(err, call_name(call).c_str(), what));
  } catch (...) {
  }
}

}  // namespace accgraph::detail::cuda
