// SPI helpers for backends: the small pieces every backend writes the same way (the checked
// stream cast, the device-index check, ownership of wrapped handles, the table of live native
// handles that wrap_stream looks a handle up in, the first-failure bookkeeping behind
// synchronize(), a replay that runs every node, a host-run timed delay, CPU memory buffers and
// the debug-dump file handling). Header-only, like PoolTable; for backend authors, not for applications.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "accgraph/backend.hpp"
#include "accgraph/error.hpp"
#include "accgraph/types.hpp"

namespace accgraph {

/// Whether an object owns the native handle it holds (destroys it with itself) or only borrows
/// it (Backend::wrap_stream: the handle stays its creator's).
///
///   return std::make_unique<MyStream>(queue, accgraph::Ownership::Borrowed);
enum class Ownership { Owned, Borrowed };

/// The stream of backend `backend` behind `stream` (a `Stream` of another backend is a caller's
/// mistake), or Error(InvalidArgument) naming `operation` and what to pass instead:
///
///   MyStream& s = accgraph::stream_cast<MyStream>(stream_impl, "mybackend", "replay");
template <class BackendStream>
BackendStream& stream_cast(StreamImpl& stream, std::string_view backend, const char* operation) {
  if (auto* cast = dynamic_cast<BackendStream*>(&stream)) return *cast;
  const std::string name(backend);
  throw Error(ErrorCode::InvalidArgument,
              std::string(operation) + ": the stream does not belong to the " + name +
                  " backend: pass a stream from Stream::create(\"" + name + "\")",
              name);
}

/// `device` as an index into a backend's `device_count` devices, or Error(InvalidArgument)
/// naming `operation` and the devices that exist. The core checks the device of create_stream,
/// wrap_stream and allocate before a backend sees it; a backend uses this where it turns the
/// number into its own device state (capabilities, create_markers) and in those calls as well.
///
///   const DeviceState& state = devices_[accgraph::check_device_index(device, devices_.size(),
///                                                                    "mybackend", "create_markers")];
inline size_t check_device_index(int device, size_t device_count, std::string_view backend,
                                 const char* operation) {
  if (device < 0 || static_cast<size_t>(device) >= device_count)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": device " + std::to_string(device) +
                    " does not exist: the " + std::string(backend) + " backend has " +
                    std::to_string(device_count) +
                    " device(s), numbered from 0; pick one of Backend::devices()",
                std::string(backend));
  return static_cast<size_t>(device);
}

/// Note [Live handles]: a native handle is a void*, so Backend::wrap_stream cannot tell a live
/// queue from a dangling or unrelated pointer by looking at it. A backend whose queues are its
/// own objects (the host backend, the examples) records each queue it creates here, by the
/// handle native_handle() returns, and wrap_stream looks the handle up instead of trusting it.
/// The table holds weak references: an entry whose object is gone is "registered but expired"
/// (a stream being destroyed), which find() tells apart from a handle never registered (a
/// backend that accepts foreign handles, like level_zero's wrapped command lists, needs both).
/// Thread-safe; expired entries are dropped as new ones come in.
///
///   accgraph::HandleTable<MyQueue> queues_{"mybackend"};
///   queues_.insert(queue.get(), queue);                        // create_stream
///   std::shared_ptr<MyQueue> queue = queues_.require_live(native_handle);  // wrap_stream
template <class Object>
class HandleTable {
 public:
  /// What find() knows of a handle: never registered, registered and live, or registered but
  /// its object is gone (or being destroyed).
  struct Lookup {
    bool registered = false;
    std::shared_ptr<Object> object;  ///< set when registered and live
  };

  explicit HandleTable(std::string backend) : backend_(std::move(backend)) {}

  /// Registers `object` under its own address (what its stream's native_handle() returns) and
  /// returns it: `return std::make_unique<MyStream>(queues_.add(std::make_shared<MyQueue>()));`
  std::shared_ptr<Object> add(std::shared_ptr<Object> object) {
    insert(object.get(), object);
    return object;
  }

  void insert(const void* handle, const std::shared_ptr<Object>& object) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->second.expired() ? entries_.erase(it) : std::next(it);
    entries_[handle] = object;
  }

  /// Forgets `handle`; call before the native object behind it is destroyed.
  void erase(const void* handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(handle);
  }

  Lookup find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return {};
    return {true, it->second.lock()};
  }

  /// For wrap_stream: the live object registered at `handle`, or Error(InvalidArgument) saying
  /// the handle is null or not the native_handle() of a live stream of this backend.
  std::shared_ptr<Object> require_live(const void* handle) const {
    if (handle == nullptr)
      throw Error(ErrorCode::InvalidArgument,
                  "wrap_stream: the native handle is null: pass the native_handle() of a live " +
                      backend_ + " stream",
                  backend_);
    std::shared_ptr<Object> object = find(handle).object;
    if (!object) {
      char shown[32];
      std::snprintf(shown, sizeof(shown), "%p", handle);
      throw Error(ErrorCode::InvalidArgument,
                  "wrap_stream: " + std::string(shown) + " is not a live " + backend_ +
                      " queue: pass the native_handle() of a " + backend_ +
                      " stream that still exists",
                  backend_);
    }
    return object;
  }

 private:
  const std::string backend_;
  mutable std::mutex mutex_;
  std::map<const void*, std::weak_ptr<Object>> entries_;
};

/// Note [First failure]: work that fails after it was enqueued (a throwing host call, a failed
/// node of a replay) cannot throw at the caller, who has moved on. A backend records the first
/// such failure of a queue here, keeps running the later work (a device does not stop its queue
/// either), and the next synchronize() throws it, once: afterwards the queue is clean again. A
/// queue destroyed with a failure nobody synchronized for logs it instead, so it is never
/// dropped silently. Thread-safe.
///
///   failures_.record(op.name, e.what());                     // the worker, in a catch block
///   failures_.throw_if_any("mybackend", "mybackend stream"); // the end of synchronize()
/// Thrown by an operation that runs others (a replay) to name the inner operation that failed:
/// FirstFailure records `operation` instead of the outer operation's name.
struct OperationFailure : std::runtime_error {
  OperationFailure(std::string operation_name, const std::string& what)
      : std::runtime_error(what), operation(std::move(operation_name)) {}
  std::string operation;
};

class FirstFailure {
 public:
  struct Failure {
    std::string operation;  ///< what failed, as the backend names its operations
    std::string message;    ///< the failure's what()
  };

  /// Keeps the failure unless an earlier one is still unreported.
  void record(std::string operation, std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = Failure{std::move(operation), std::move(message)};
  }

  /// Records the exception being handled (call it in a catch block): an OperationFailure under
  /// the inner operation it names, anything else under `operation`. Never throws.
  void record_current_exception(const std::string& operation) noexcept {
    try {
      try {
        throw;
      } catch (const OperationFailure& failure) {
        record(failure.operation, failure.what());
      } catch (const std::exception& e) {
        record(operation, e.what());
      } catch (...) {
        record(operation, "an exception that is not a std::exception");
      }
    } catch (...) {  // out of memory while recording: nothing better to do
    }
  }

  /// The failure recorded since the last take(), and forgets it.
  std::optional<Failure> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<Failure> taken = std::move(failure_);
    failure_.reset();
    return taken;
  }

  /// Throws the recorded failure as Error(BackendError) attributed to `backend`, naming the
  /// operation and `queue` (e.g. "host stream 0x5581..."); returns when there is none.
  void throw_if_any(std::string_view backend, std::string_view queue) {
    std::optional<Failure> failure = take();
    if (!failure) return;
    throw Error(ErrorCode::BackendError,
                "operation '" + failure->operation + "' on " + std::string(queue) +
                    " failed: " + failure->message +
                    " (synchronize() reports the first failure since the previous "
                    "synchronize(); later work still ran, and the stream can be used again)",
                std::string(backend));
  }

  /// For destructors: logs an unreported failure as a warning. Never throws.
  void log_if_any(std::string_view backend, std::string_view queue) noexcept {
    try {
      if (std::optional<Failure> failure = take())
        log(LogLevel::Warning, std::string(backend) + ": " + std::string(queue) +
                                   " was destroyed with an unreported failure of '" +
                                   failure->operation + "': " + failure->message +
                                   " (synchronize() the stream before destroying it to see "
                                   "such failures as errors)");
    } catch (...) {
    }
  }

 private:
  std::mutex mutex_;
  std::optional<Failure> failure_;
};

/// Note [Replays run every node]: a replay runs every node of the graph even after one failed,
/// so that a marker set's end_sequence still publishes completion (a profiler waiting for the
/// replay would hang otherwise), and reports the first failure, as one OperationFailure naming
/// the node: "<name_of(i)> (node <i> of a <replay>)". `run(i)` runs node i.
template <class Run, class NameOf>
void run_every_node(size_t count, Run&& run, NameOf&& name_of, std::string_view replay) {
  std::optional<OperationFailure> first;
  for (size_t i = 0; i < count; ++i) {
    try {
      run(i);
    } catch (...) {
      if (first) continue;
      std::string what = "an exception that is not a std::exception";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      first.emplace(std::string(name_of(i)) + " (node " + std::to_string(i) + " of a " +
                        std::string(replay) + ")",
                    what);
    }
  }
  if (first) throw *first;
}

/// The body of a host-run Stream::delay (Capabilities::timed_delay): returns no earlier than
/// `duration` after it was called. It sleeps through most of a long delay and spins on
/// steady_clock for the last 200 us, for a precise end without burning a shared core: a thread
/// that spins for milliseconds uses up its time slice and is then preempted for a whole one
/// (measured: a pure 5 ms spin took a median 7.9 ms on 2 loaded cores). Saturating: a duration
/// near nanoseconds::max() waits "forever" instead of overflowing.
inline void delay_on_this_thread(std::chrono::nanoseconds duration) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSpinTail = std::chrono::microseconds(200);
  const auto now = clock::now();
  const auto deadline =
      duration < clock::time_point::max() - now ? now + duration : clock::time_point::max();
  if (duration > kSpinTail) std::this_thread::sleep_until(deadline - kSpinTail);
  while (clock::now() < deadline) {
  }
}

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

/// GraphImplInterface::debug_dump's file handling: opens `path`, lets `write` fill it, and turns
/// a file that cannot be opened or written into Error(BackendError) naming the path, the
/// system's reason and what to check.
template <class Write>
void write_debug_dump(const std::string& path, std::string_view backend, Write&& write) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::BackendError,
                "debug_dump: " + what + ": " + std::strerror(errno) +
                    "; check that the directory exists and is writable, and that the disk is "
                    "not full",
                std::string(backend), "std::ofstream");
  };
  std::ofstream out(path);
  if (!out) fail("cannot open '" + path + "' for writing");
  write(out);
  out.flush();
  if (!out) fail("writing '" + path + "' failed");
}

/// "host stream 0x55d0c0ffee00": how a FirstFailure names a queue, by the handle users see
/// (Stream::native_handle()) rather than a number private to the backend.
inline std::string describe_queue(std::string_view backend, const void* native_handle) {
  char shown[32];
  std::snprintf(shown, sizeof(shown), "%p", native_handle);
  return std::string(backend) + " stream " + shown;
}

}  // namespace accgraph
