// Internal: turns a failed CUDA runtime call into accgraph::Error(BackendError) naming the call,
// the cudaError_t and, for the capture errors users hit most, what to do next.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "accgraph/error.hpp"

namespace accgraph::detail::cuda {

/// A hint for the errors with a known remedy (empty when none).
const char* error_hint(cudaError_t err) noexcept;

/// Throws Error(BackendError, "<what>: <call> failed: <name> (<description>)[; hint]", "cuda",
/// call, name). Clears the runtime's last-error state first so the next call starts clean.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const std::string& what);

/// The message that throw_cuda_error would use (for destructors that only log).
std::string cuda_error_message(cudaError_t err, const char* call, const std::string& what);

/// Checks one runtime call. `what` names the operation for the reader ("replay of graph").
inline void check(cudaError_t err, const char* call, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(err, call, what);
}

/// Logs (never throws) a failed call: for destructors.
void check_noexcept(cudaError_t err, const char* call, const char* what) noexcept;

}  // namespace accgraph::detail::cuda

/// ACCGRAPH_CUDA_CHECK(cudaStreamSynchronize(s), "synchronize"): the call's text is the native
/// call named in the error.
#define ACCGRAPH_CUDA_CHECK(expr, what)                                              \
  do {                                                                               \
    cudaError_t accgraph_cuda_err_ = (expr);                                         \
    if (accgraph_cuda_err_ != cudaSuccess)                                           \
      ::accgraph::detail::cuda::throw_cuda_error(accgraph_cuda_err_, #expr, (what)); \
  } while (0)

#define ACCGRAPH_CUDA_LOG(expr, what) \
  ::accgraph::detail::cuda::check_noexcept((expr), #expr, (what))
