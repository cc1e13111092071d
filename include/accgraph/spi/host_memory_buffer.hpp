// SPI helper for backends whose device is the CPU: BufferImpl on aligned, zero-filled host
// memory.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

/// Memory of a backend whose device is the CPU: zero-filled, aligned to a cache line (so buffers
/// written by different threads never share one), freed with the object. Throws
/// Error(BackendError) attributed to `backend` when the process is out of memory.
class HostMemoryBuffer final : public BufferImpl {
 public:
  static constexpr std::align_val_t kAlignment{64};

  HostMemoryBuffer(size_t bytes, MemoryKind kind, std::string_view backend)
      : data_(::operator new(bytes, kAlignment, std::nothrow)), bytes_(bytes), kind_(kind) {
    if (data_ == nullptr)
      throw Error(ErrorCode::BackendError,
                  "allocating " + std::to_string(bytes) + " bytes of " + to_string(kind) +
                      " memory failed: the process is out of memory; free buffers or allocate "
                      "less",
                  std::string(backend), "operator new");
    std::memset(data_, 0, bytes);
  }
  ~HostMemoryBuffer() override { ::operator delete(data_, kAlignment); }
  HostMemoryBuffer(const HostMemoryBuffer&) = delete;
  HostMemoryBuffer& operator=(const HostMemoryBuffer&) = delete;

  void* data() const override { return data_; }
  size_t size() const override { return bytes_; }
  MemoryKind kind() const override { return kind_; }

 private:
  void* data_;
  size_t bytes_;
  MemoryKind kind_;
};

}  // namespace accgraph
