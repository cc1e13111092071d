// Internal: turns a failed CUDA runtime call into accgraph::Error naming the operation, the call,
// the cudaError_t and, for the capture errors users hit most, what to do next (Note [Native
// calls] in accgraph/spi/native_call.hpp).
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/native_call.hpp"

namespace accgraph::detail::cuda {

/// A hint for the errors with a known remedy (empty when none).
const char* error_hint(cudaError_t err) noexcept;

/// Capture misuse is InvalidState (a call in the wrong order), everything else BackendError.
ErrorCode error_code_for(cudaError_t err) noexcept;

/// cudaError_t for accgraph's native-call checks.
struct CudaCall {
  using Result = cudaError_t;
  static constexpr const char* kBackend = "cuda";
  static bool succeeded(cudaError_t err) noexcept { return err == cudaSuccess; }
  static std::string name(cudaError_t err) { return cudaGetErrorName(err); }
  static std::string meaning(cudaError_t err) { return cudaGetErrorString(err); }
  static std::string hint(cudaError_t err) { return error_hint(err); }
  static ErrorCode error_code(cudaError_t err) noexcept { return error_code_for(err); }
  /// A non-sticky error must not resurface in the next check.
  static void on_failure(cudaError_t) noexcept { (void)cudaGetLastError(); }
};

/// ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(s), "synchronize") throws, naming the call;
/// ACCGRAPH_CUDA_LOG(...) logs instead, for destructors.
#define ACCGRAPH_CUDA_CHECK(expr, what) \
  ACCGRAPH_NATIVE_CHECK(::accgraph::detail::cuda::CudaCall, expr, what)
#define ACCGRAPH_CUDA_LOG(expr, what) \
  ACCGRAPH_NATIVE_LOG(::accgraph::detail::cuda::CudaCall, expr, what)

/// Throws the Error of a failed call whose name is known ("cudaGraphLaunch").
[[noreturn]] inline void throw_cuda_error(cudaError_t err, std::string_view call,
                                          std::string_view what) {
  NativeCall<CudaCall>::fail(err, call, what);
}

}  // namespace accgraph::detail::cuda
