// The CUDA backend's half of Note [Native calls]: hints for the errors with a known remedy, and
// which accgraph code a failed call maps to.
#include "cuda_check.hpp"

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

}  // namespace accgraph::detail::cuda
