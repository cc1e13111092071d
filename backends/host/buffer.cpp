// Host buffers: cache-line-aligned CPU memory, for Device and Host kinds alike (the "device" of
// the host backend is the CPU).
#include <new>

#include <fmt/format.h>

#include "host_internal.hpp"

namespace accgraph::detail::host {

namespace {
// A cache line, so that buffers filled by different workers never share one; also what SIMD
// memcpy/memset like and what a device allocation would guarantee at least.
constexpr std::align_val_t kAlignment{64};
}  // namespace

HostBuffer::HostBuffer(size_t bytes, MemoryKind kind)
    : data_(::operator new(bytes, kAlignment, std::nothrow)), bytes_(bytes), kind_(kind) {
  if (data_ == nullptr)
    throw Error(ErrorCode::BackendError,
                fmt::format("allocating {} bytes of {} memory failed: the process is out of "
                            "memory; free buffers or allocate less",
                            bytes, to_string(kind)),
                kBackendName, "operator new");
}

HostBuffer::~HostBuffer() { ::operator delete(data_, kAlignment); }

}  // namespace accgraph::detail::host
