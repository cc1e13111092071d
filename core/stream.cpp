// Stream and Buffer: argument checks and bookkeeping in front of the backend's StreamImpl and
// BufferImpl.
#include "accgraph/stream.hpp"

#include <atomic>

#include <fmt/format.h>

#include "accgraph/dlpack.hpp"
#include "accgraph/error.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "internal/backend_lookup.hpp"
#include "internal/observers.hpp"
#include "stream_state.hpp"
#include "timing_seam.hpp"

namespace accgraph {

namespace {

std::atomic<uint64_t> next_stream_id{1};

Backend& resolve_backend(std::string_view name, std::string& resolved_name) {
  detail::ResolvedBackend resolved = detail::resolve_backend(name);
  resolved_name = std::move(resolved.name);
  return *resolved.backend;
}

void check_device(Backend& backend, const std::string& name, int device) {
  size_t count = backend.devices().size();
  if (device < 0 || static_cast<size_t>(device) >= count)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("device {} does not exist: backend '{}' has {} device(s), numbered "
                            "from 0",
                            device, name, count));
}

[[noreturn]] void throw_empty_stream(const char* operation) {
  throw Error(ErrorCode::InvalidState,
              fmt::format("{}: this Stream is empty (moved from): use the Stream it was moved "
                          "into",
                          operation));
}

// The sized Buffer overloads: a Buffer knows its size, so a count past it is refused before
// anything is written past the allocation.
void check_fits(const char* operation, size_t bytes, const char* which, const Buffer& buffer,
                const std::string& backend_name) {
  if (bytes > buffer.size())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{} of {} bytes but the {} Buffer holds {} bytes: pass nbytes <= "
                            "the Buffer's size",
                            operation, bytes, which, buffer.size()),
                backend_name);
}

// " (graph N)" for the graph a stream captures into, empty when accgraph does not know it (a
// capture begun natively): for the messages of what a capturing stream refuses.
std::string graph_suffix(const AcceleratorGraph* graph) {
  return graph ? fmt::format(" (graph {})", graph->id()) : std::string();
}

}  // namespace

namespace detail {

// The deleter of every StreamState: runs while the state is still whole, so the observers get a
// usable (non-owning) handle. Weak references (graphs, regions) have expired already.
void StreamAccess::destroy(StreamState* state) noexcept {
  if (state->impl && state->capturing_graph != nullptr) {
    bool capturing = false;
    try {
      capturing = state->impl->is_capturing();
    } catch (...) {
    }
    if (capturing) state->capturing_graph->on_stream_destroyed(state->id);
  }
  if (installed_observer_count.load(std::memory_order_relaxed) != 0) {
    Stream handle = StreamAccess::handle(std::shared_ptr<StreamState>(state, [](StreamState*) {}));
    notify_observers([&](GraphObserver& o) { o.on_stream_destroy(handle); });
  }
  delete state;
}

void StreamAccess::join_capture(const std::shared_ptr<StreamState>& joining,
                                AcceleratorGraph* graph) {
  joining->capturing_graph = graph;
  if (graph != nullptr) graph->joined_streams_.push_back(joining);
}

std::shared_ptr<StreamState> StreamAccess::create() {
  return std::shared_ptr<StreamState>(new StreamState(), &StreamAccess::destroy);
}

const std::shared_ptr<StreamState>& StreamAccess::shared(const Stream& stream,
                                                         const char* operation) {
  if (!stream.state_)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: the stream is empty (moved from): pass the Stream it was moved "
                            "into",
                            operation));
  return stream.state_;
}

}  // namespace detail

Stream::Stream(std::shared_ptr<detail::StreamState> state) : state_(std::move(state)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

Stream Stream::create(std::string_view backend_name, int device) {
  std::shared_ptr<detail::StreamState> state = detail::StreamAccess::create();
  state->backend = &resolve_backend(backend_name, state->backend_name);
  check_device(*state->backend, state->backend_name, device);
  state->impl = state->backend->create_stream(device);
  if (!state->impl)
    throw Error(ErrorCode::BackendError, "create_stream returned no stream", state->backend_name);
  state->capture_tail = capture_tail_of(*state->impl);
  state->capabilities = state->backend->capabilities(device);
  state->id = next_stream_id.fetch_add(1);
  return Stream(std::move(state));
}

Stream Stream::wrap(std::string_view backend_name, int device, void* native_handle) {
  std::shared_ptr<detail::StreamState> state = detail::StreamAccess::create();
  state->backend = &resolve_backend(backend_name, state->backend_name);
  check_device(*state->backend, state->backend_name, device);
  state->impl = state->backend->wrap_stream(device, native_handle);
  if (!state->impl)
    throw Error(ErrorCode::BackendError, "wrap_stream returned no stream", state->backend_name);
  state->capture_tail = capture_tail_of(*state->impl);
  state->capabilities = state->backend->capabilities(device);
  state->id = next_stream_id.fetch_add(1);
  state->native = true;  // its owner may capture it natively (Note [Native captures])
  return Stream(std::move(state));
}

detail::StreamState& Stream::state() const {
  if (!state_) throw_empty_stream("Stream");
  return *state_;
}

void Stream::copy(void* dst, const void* src, size_t bytes) {
  detail::StreamState& s = state();
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("copy of {} bytes with a null {} pointer: pass valid buffers", bytes,
                            dst == nullptr ? "destination" : "source"),
                s.backend_name);
  s.impl->copy(dst, src, bytes);
  s.count_operation();
}

void Stream::copy(Buffer& dst, const Buffer& src) {
  if (dst.size() < src.size())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("copy: the destination holds {} bytes but the source {}: pass a "
                            "destination at least as large",
                            dst.size(), src.size()),
                state().backend_name);
  copy(dst.data(), src.data(), src.size());
}

void Stream::fill(void* dst, uint8_t value, size_t bytes) {
  detail::StreamState& s = state();
  if (bytes == 0) return;
  if (dst == nullptr)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("fill of {} bytes with a null destination: pass a valid buffer", bytes),
                s.backend_name);
  s.impl->fill(dst, value, bytes);
  s.count_operation();
}

void Stream::fill(Buffer& dst, uint8_t value) { fill(dst.data(), value, dst.size()); }

void Stream::copy(Buffer& dst, const Buffer& src, size_t bytes) {
  check_fits("copy", bytes, "destination", dst, state().backend_name);
  check_fits("copy", bytes, "source", src, state().backend_name);
  copy(dst.data(), src.data(), bytes);
}

void Stream::copy(Buffer& dst, const void* src, size_t bytes) {
  check_fits("copy", bytes, "destination", dst, state().backend_name);
  copy(dst.data(), src, bytes);
}

void Stream::copy(void* dst, const Buffer& src, size_t bytes) {
  check_fits("copy", bytes, "source", src, state().backend_name);
  copy(dst, src.data(), bytes);
}

void Stream::fill(Buffer& dst, uint8_t value, size_t bytes) {
  check_fits("fill", bytes, "destination", dst, state().backend_name);
  fill(dst.data(), value, bytes);
}

void Stream::host_call(std::function<void()> fn) {
  detail::StreamState& s = state();
  if (!fn)
    throw Error(ErrorCode::InvalidArgument, "host_call with an empty function", s.backend_name);
  if (!s.capabilities.host_calls)
    throw Error(ErrorCode::Unsupported,
                "host_call is not supported by this backend: check capabilities().host_calls "
                "before enqueuing C++ callables",
                s.backend_name);
  s.impl->host_call(std::move(fn));
  s.count_operation();
}

void Stream::delay(std::chrono::nanoseconds duration) {
  detail::StreamState& s = state();
  if (duration.count() < 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("delay of {} ns: the duration must not be negative", duration.count()),
                s.backend_name);
  // The documented maximum (stream.hpp) keeps every backend's deadline arithmetic far from
  // overflow (nanoseconds::max() would wrap the host backend's deadline).
  constexpr std::chrono::hours kMaxDelay{24};
  if (duration > kMaxDelay)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("delay of {} ns is longer than the maximum of 24 hours ({} ns): "
                            "enqueue several shorter delays",
                            duration.count(), std::chrono::nanoseconds(kMaxDelay).count()),
                s.backend_name);
  if (!s.capabilities.timed_delay)
    throw Error(ErrorCode::Unsupported,
                "delay is not supported by this backend: check capabilities().timed_delay first",
                s.backend_name);
  s.impl->delay(duration);
  s.count_operation();
}

void Stream::wait(Stream& other) {
  detail::StreamState& s = state();
  detail::StreamState& o = other.state();
  if (&s == &o)
    throw Error(ErrorCode::InvalidArgument,
                "wait: a stream cannot wait for itself: pass another stream", s.backend_name);
  if (s.backend != o.backend)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("wait: this stream belongs to backend '{}' and the other to '{}': "
                            "streams can only wait for streams of the same backend",
                            s.backend_name, o.backend_name),
                s.backend_name);
  bool other_capturing = o.impl->is_capturing();
  // Note [Fork/join] in backend.hpp: the two waits no backend can record are refused here, so
  // every backend gives the same error (and CUDA's capture is not invalidated by them).
  if (!other_capturing && s.impl->is_capturing()) {
    throw Error(ErrorCode::InvalidState,
                fmt::format("wait: this stream is capturing{} but the stream it waits for is not: "
                            "a graph cannot wait for eager work; synchronize() that stream before "
                            "capture_begin, or fork it into the capture first (other.wait(this))",
                            graph_suffix(capturing_graph())),
                s.backend_name);
  }
  if (other_capturing && s.impl->is_capturing()) {
    AcceleratorGraph* mine = capturing_graph();
    AcceleratorGraph* theirs = other.capturing_graph();
    if (mine != nullptr && theirs != nullptr && mine != theirs)
      throw Error(ErrorCode::InvalidState,
                  fmt::format("wait: this stream is capturing into another graph than the stream "
                              "it waits for (graph {} and graph {}): one capture cannot depend on "
                              "another; end one of the captures first",
                              mine->id(), theirs->id()),
                  s.backend_name);
  }
  if (other_capturing && !s.capabilities.multi_stream_capture)
    throw Error(ErrorCode::Unsupported,
                "wait: the other stream is capturing and this backend cannot fork a capture onto "
                "another stream (capabilities().multi_stream_capture is false): enqueue the "
                "work on the capturing stream",
                s.backend_name);
  // A fork (or join) of an accgraph capture: whoever times the graph enqueues what must precede
  // every branch on `other` first (Note [Marker ring]: begin_sequence before any record()).
  if (other_capturing && o.capturing_graph != nullptr)
    if (AcceleratorGraph* graph = other.capturing_graph())
      detail::GraphAccess::before_fork(*graph, other);
  s.impl->wait_for(*o.impl);
  s.count_operation();
  if (other_capturing && s.impl->is_capturing()) {
    detail::StreamAccess::join_capture(detail::StreamAccess::shared(*this, "wait"),
                                       o.capturing_graph);
    s.native = s.native || o.native;  // joined a capture accgraph may not know (fork)
  }
}

void Stream::synchronize() {
  detail::StreamState& s = state();
  if (s.impl->is_capturing()) {
    throw Error(ErrorCode::InvalidState,
                fmt::format("synchronize() is not allowed while the stream is capturing{}: the "
                            "captured work has not run; end the capture first (capture_end), or "
                            "reset() the graph to abandon it",
                            graph_suffix(capturing_graph())),
                s.backend_name);
  }
  s.impl->synchronize();
}

bool Stream::is_capturing() const { return state().impl->is_capturing(); }

AcceleratorGraph* Stream::capturing_graph() const {
  detail::StreamState& s = state();
  if (s.capturing_graph == nullptr || !s.impl->is_capturing()) return nullptr;
  return s.capturing_graph;
}

// Note [Native work]: work the caller enqueues on the native handle is invisible to accgraph, so
// the operation count cannot say whether anything came between two region boundaries. Asking
// for the handle makes the stream native (as wrapping it does), and on a native stream two
// boundaries share a marker only where the backend's capture tail proves that nothing was
// enqueued between them (Note [Boundary sharing] in timing/engine/region_recorder.cpp): while it
// captures and its StreamImpl implements CaptureTail (Note [Capture tail]); never eagerly.
void* Stream::native_handle() const {
  detail::StreamState& s = state();
  s.native = true;  // the caller may capture it natively now (Note [Native captures])
  return s.impl->native_handle();
}
int Stream::device() const { return state().impl->device(); }
Backend& Stream::backend() const { return *state().backend; }
const std::string& Stream::backend_name() const { return state().backend_name; }
Capabilities Stream::capabilities() const { return state().capabilities; }
uint64_t Stream::id() const { return state().id; }

// --- Buffer ---------------------------------------------------------------------------------

Buffer::Buffer(std::unique_ptr<BufferImpl> impl) : impl_(std::move(impl)) {}
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;
Buffer::~Buffer() = default;

Buffer Buffer::allocate(const Stream& stream, size_t bytes, MemoryKind kind) {
  return allocate(stream.backend_name(), stream.device(), bytes, kind);
}

Buffer Buffer::allocate(std::string_view backend_name, int device, size_t bytes, MemoryKind kind) {
  std::string name;
  Backend& backend = resolve_backend(backend_name, name);
  if (bytes == 0)
    throw Error(ErrorCode::InvalidArgument,
                "Buffer::allocate of 0 bytes: ask for at least one byte", name);
  check_device(backend, name, device);
  std::unique_ptr<BufferImpl> impl = backend.allocate(device, bytes, kind);
  if (!impl) throw Error(ErrorCode::BackendError, "allocate returned no buffer", name);
  return Buffer(std::move(impl));
}

void* Buffer::data() const { return impl_ ? impl_->data() : nullptr; }
size_t Buffer::size() const { return impl_ ? impl_->size() : 0; }
MemoryKind Buffer::kind() const { return impl_ ? impl_->kind() : MemoryKind::Host; }

// Note [DLPack devices] (spi/dlpack_device.hpp).
DlpackDevice dlpack_device(std::string_view backend_name, int device, MemoryKind kind) {
  std::string name;
  const Backend& backend = resolve_backend(backend_name, name);
  if (const DlpackDevices* devices = dlpack_devices_of(backend))
    return devices->dlpack_device(device, kind);
  return default_dlpack_device(device, kind);
}

}  // namespace accgraph
