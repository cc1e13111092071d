// SPI helper for backends: the table of live native handles that wrap_stream looks a handle up in.
#pragma once

#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "accgraph/error.hpp"

namespace accgraph {

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

}  // namespace accgraph
