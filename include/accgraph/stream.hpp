// Streams (in-order device queues) and Buffers (RAII allocations): the portable way to put work
// on any backend.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "accgraph/export.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

class Backend;
class StreamImpl;
class BufferImpl;
class AcceleratorGraph;
class Buffer;

namespace detail {
struct StreamState;
struct StreamAccess;
}  // namespace detail

/// An in-order queue on one device of one backend. Move-only; a moved-from Stream is empty.
/// Moving a Stream (also inside a std::vector that reallocates) moves a handle: graphs and
/// regions refer to the queue itself, not to the Stream object, so they stay valid. When the
/// Stream is destroyed the queue is destroyed with it (after its enqueued work has run): a graph
/// whose capture began on it aborts that capture, and replay() without a stream then throws
/// InvalidState.
///
///   accgraph::Stream s = accgraph::Stream::create("host");
///   s.fill(buf.data(), 0xff, buf.size());
///   s.synchronize();
class ACCGRAPH_API Stream {
 public:
  /// A new stream owned by accgraph. An empty backend name means the default backend.
  static Stream create(std::string_view backend = {}, int device = 0);
  /// Wraps a native queue (cudaStream_t, ze_command_list_handle_t, ...) without owning it: the
  /// native queue is not destroyed with the Stream and must outlive it.
  static Stream wrap(std::string_view backend, int device, void* native_handle);

  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// Copies `bytes` bytes between raw addresses: the caller answers for both ranges.
  void copy(void* dst, const void* src, size_t bytes);
  /// Copies all of `src` into `dst` (which must be at least as large).
  void copy(Buffer& dst, const Buffer& src);
  /// Copies the first `bytes` bytes of `src` into `dst`; InvalidArgument when a Buffer holds
  /// fewer (the raw address of the mixed forms is the caller's to answer for).
  void copy(Buffer& dst, const Buffer& src, size_t bytes);
  void copy(Buffer& dst, const void* src, size_t bytes);
  void copy(void* dst, const Buffer& src, size_t bytes);
  /// Sets `bytes` bytes at a raw address: the caller answers for the range.
  void fill(void* dst, uint8_t value, size_t bytes);
  void fill(Buffer& dst, uint8_t value);
  /// Sets the first `bytes` bytes of `dst`; InvalidArgument when it holds fewer.
  void fill(Buffer& dst, uint8_t value, size_t bytes);
  /// Enqueues a C++ callable; Unsupported unless capabilities().host_calls.
  void host_call(std::function<void()> fn);
  /// Enqueues device work lasting at least `duration`; Unsupported unless
  /// capabilities().timed_delay. `duration` must be from 0 to 24 hours (InvalidArgument
  /// otherwise); enqueue several delays for a longer wait.
  void delay(std::chrono::nanoseconds duration);
  /// This stream waits for the work enqueued on `other` so far. During a capture on `other` this
  /// forks the capture onto this stream; `origin.wait(forked)` joins it back.
  void wait(Stream& other);

  /// Blocks until the enqueued work is done. An InvalidState error while capturing.
  void synchronize();
  bool is_capturing() const;
  /// The graph capturing on this stream, or nullptr.
  AcceleratorGraph* capturing_graph() const;
  void* native_handle() const;

  int device() const;
  Backend& backend() const;
  const std::string& backend_name() const;
  Capabilities capabilities() const;
  /// A process-unique id (one trace track per stream).
  uint64_t id() const;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend struct detail::StreamAccess;  // the core's and timing layer's way to the queue
  // The queue's state (InvalidArgument when this Stream is empty): its backend StreamImpl and
  // the count of operations enqueued through it (how the timing layer tells adjacent regions).
  detail::StreamState& state() const;
  explicit Stream(std::shared_ptr<detail::StreamState> state);
  // Shared with the short-lived handles the core makes for hook calls; graphs and regions keep
  // only weak references, so the queue dies with the last Stream the user holds.
  std::shared_ptr<detail::StreamState> state_;
};

/// A device or host allocation, freed when the Buffer is destroyed. Move-only.
class ACCGRAPH_API Buffer {
 public:
  /// An allocation on the stream's backend and device.
  static Buffer allocate(const Stream& stream, size_t bytes, MemoryKind kind = MemoryKind::Device);
  static Buffer allocate(std::string_view backend, int device, size_t bytes,
                         MemoryKind kind = MemoryKind::Device);

  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const;
  size_t size() const;
  MemoryKind kind() const;
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }

 private:
  explicit Buffer(std::unique_ptr<BufferImpl> impl);
  std::unique_ptr<BufferImpl> impl_;
};

}  // namespace accgraph
