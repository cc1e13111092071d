// Stream and Buffer from Python: streams created or wrapped from native handles (an int, a
// torch.cuda.Stream's .cuda_stream, the __cuda_stream__ protocol), the portable operations, and
// buffers that speak the buffer protocol (host memory) and DLPack (all memory).
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>

#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"

namespace accgraph::python {

namespace {

// Note [DLPack devices] (accgraph/spi/dlpack_device.hpp): the backend states where its memory
// lives (PyBuffer::dlpack); the buffer protocol is offered where the CPU can address it.
int buffer_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  PyBuffer* b = nb::inst_ptr<PyBuffer>(self);
  if (!b->buffer) {
    PyErr_SetString(PyExc_BufferError, "accgraph.Buffer: the buffer was freed");
    return -1;
  }
  const Buffer& buffer = *b->buffer;
  if (!dlpack::host_addressable(b->dlpack.device_type)) {
    std::string message = "accgraph.Buffer: " + std::string(to_string(buffer.kind())) +
                          " memory of the " + b->backend +
                          " backend is not addressable by the CPU, so it has no buffer "
                          "protocol: allocate it with kind='host', or use DLPack (__dlpack__)";
    PyErr_SetString(PyExc_BufferError, message.c_str());
    return -1;
  }
  return PyBuffer_FillInfo(view, self, buffer.data(), static_cast<Py_ssize_t>(buffer.size()),
                           /*readonly=*/0, flags);
}

PyType_Slot buffer_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(buffer_getbuffer)},
                              {0, nullptr}};

// A native queue handle from an int, an object with an int `cuda_stream` attribute
// (torch.cuda.Stream) or the __cuda_stream__ protocol ((version, handle)).
void* native_handle_of(nb::handle handle) {
  nb::object value = nb::borrow(handle);
  if (nb::hasattr(handle, "__cuda_stream__")) {
    nb::object pair = handle.attr("__cuda_stream__")();
    if (!nb::isinstance<nb::tuple>(pair) || nb::len(pair) != 2)
      throw nb::type_error("__cuda_stream__() must return a (version, handle) tuple");
    value = pair[1];
  } else if (nb::hasattr(handle, "cuda_stream")) {
    value = handle.attr("cuda_stream");
  }
  if (!nb::isinstance<nb::int_>(value))
    throw nb::type_error(
        "Stream.wrap: the handle must be an int, an object with an int 'cuda_stream' attribute "
        "(torch.cuda.Stream) or one with __cuda_stream__()");
  nb::int_ number = nb::borrow<nb::int_>(value);
  if (number < nb::int_(0) || number > nb::int_(std::numeric_limits<uintptr_t>::max()))
    throw Error(ErrorCode::InvalidArgument,
                "Stream.wrap: the handle " + nb::cast<std::string>(nb::str(value)) +
                    " is not an address: pass a native queue handle (a non-negative int)");
  return reinterpret_cast<void*>(nb::cast<uintptr_t>(number));
}

// A duration from seconds (int or float) or a datetime.timedelta, as nanoseconds. Values past
// the int64 range are clamped so that Stream::delay rejects them with its range message.
std::chrono::nanoseconds duration_of(nb::handle value) {
  double seconds = 0;
  nb::object datetime = nb::module_::import_("datetime");
  if (nb::isinstance(value, datetime.attr("timedelta"))) {
    // Exact in integers: days, seconds and microseconds of the timedelta.
    long long days = nb::cast<long long>(value.attr("days"));
    long long secs = nb::cast<long long>(value.attr("seconds"));
    long long micros = nb::cast<long long>(value.attr("microseconds"));
    constexpr long long kMaxDays = std::numeric_limits<int64_t>::max() / 86'400'000'000'000LL;
    if (days > kMaxDays || days < -kMaxDays)
      return days > 0 ? std::chrono::nanoseconds::max() : std::chrono::nanoseconds::min();
    return std::chrono::nanoseconds((days * 86'400LL + secs) * 1'000'000'000LL + micros * 1000LL);
  }
  if (nb::isinstance<nb::bool_>(value) ||
      !(nb::isinstance<nb::int_>(value) || nb::isinstance<nb::float_>(value)))
    throw nb::type_error("Stream.delay: give seconds (int or float) or a datetime.timedelta");
  seconds = nb::cast<double>(nb::float_(value));
  if (std::isnan(seconds))
    throw Error(ErrorCode::InvalidArgument, "Stream.delay: the duration is NaN: give seconds");
  const double ns = seconds * 1e9;
  if (ns >= 9.2e18) return std::chrono::nanoseconds::max();
  if (ns <= -9.2e18) return std::chrono::nanoseconds::min();
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

// A raw address argument of copy/fill.
void* address_of(nb::handle value, const char* what) {
  if (nb::isinstance<PyBuffer>(value)) return nb::inst_ptr<PyBuffer>(value)->get().data();
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    nb::int_ number = nb::borrow<nb::int_>(value);
    if (number < nb::int_(0) || number > nb::int_(std::numeric_limits<uintptr_t>::max()))
      throw Error(ErrorCode::InvalidArgument,
                  std::string(what) + ": the address " + nb::cast<std::string>(nb::str(value)) +
                      " is out of range: pass a Buffer or a non-negative int");
    return reinterpret_cast<void*>(nb::cast<uintptr_t>(number));
  }
  throw nb::type_error((std::string(what) +
                        ": expected an accgraph.Buffer or an int address, "
                        "got " +
                        nb::cast<std::string>(nb::str(value.type().attr("__name__"))))
                           .c_str());
}

size_t byte_count(const IntArg& nbytes_arg, const char* what) {
  const auto nbytes = int_arg<int64_t>(nbytes_arg, (std::string(what) + ": nbytes").c_str());
  if (nbytes < 0)
    throw Error(ErrorCode::InvalidArgument, std::string(what) + ": nbytes is " +
                                                std::to_string(nbytes) +
                                                ": give a byte count of 0 or more");
  return static_cast<size_t>(nbytes);
}

uint8_t fill_byte(const IntArg& value_arg) {
  const auto value = int_arg<int64_t>(value_arg, "Stream.fill: value");
  if (value < 0 || value > 255)
    throw Error(ErrorCode::InvalidArgument, "Stream.fill: the value " + std::to_string(value) +
                                                " is not a byte: give a value from 0 to 255");
  return static_cast<uint8_t>(value);
}

// Note [Buffer lifetime]: work enqueued on a stream runs later, so a Buffer dropped right after
// `stream.fill(buf, 1)` (or after the graph that captured it was dropped while replays were in
// flight) would be freed under running work. So a Buffer remembers the streams it was used on
// (eagerly, or through the replays of graphs that captured it: PyGraph::replayed_on), and
// dropping it first waits for the work enqueued on those that still exist, as cudaFree waits
// for the device. A failure found by that wait is logged, since a destructor cannot raise. A
// graph keeps the Buffers of its capture until it is reset, re-captured or dropped. Why this is
// the binding's and not C++'s: Note [Python-only lifetime policy] in common.hpp.
void note_use(PyStream& py_stream, Stream& stream, nb::handle buffer) {
  if (!nb::isinstance<PyBuffer>(buffer)) return;
  nb::inst_ptr<PyBuffer>(buffer)->used_on.add(py_stream.stream);
  if (PyGraph* graph = PyGraph::capturing_on(stream))
    graph->captured_buffers.push_back(nb::borrow(buffer));
}

// Buffer(stream, nbytes, kind) and Buffer.allocate(stream, nbytes, kind): the allocation and
// where it lives.
std::tuple<Buffer, std::string, int> allocate_on(PyStream& stream, const IntArg& nbytes,
                                                 const EnumOrName<MemoryKind>& kind,
                                                 const char* what) {
  std::shared_ptr<Stream> s_owner = stream.share();
  Stream& s = *s_owner;
  size_t bytes = byte_count(nbytes, what);
  MemoryKind memory = parse_memory_kind(kind);
  Buffer buffer = [&] {
    GilRelease release;
    return Buffer::allocate(s, bytes, memory);
  }();
  return {std::move(buffer), s.backend_name(), s.device()};
}

// The Buffer behind a copy/fill argument, or nullptr for an int address.
Buffer* buffer_of(nb::handle value) {
  return nb::isinstance<PyBuffer>(value) ? &nb::inst_ptr<PyBuffer>(value)->get() : nullptr;
}

// Stream.copy. A Buffer given with nbytes goes to the overload that checks nbytes against its
// size; an int address is the caller's to answer for.
void stream_copy(PyStream& self, nb::handle dst, nb::handle src, std::optional<IntArg> nbytes) {
  std::shared_ptr<Stream> stream_owner = self.share();
  Stream& stream = *stream_owner;
  void* to = address_of(dst, "Stream.copy");
  const void* from = address_of(src, "Stream.copy");
  note_use(self, stream, dst);
  note_use(self, stream, src);
  Buffer* dst_buffer = buffer_of(dst);
  const Buffer* src_buffer = buffer_of(src);
  if (!nbytes && !(dst_buffer && src_buffer))
    throw Error(ErrorCode::InvalidArgument,
                "Stream.copy: nbytes is required when dst or src is an address");
  const size_t bytes = nbytes ? byte_count(*nbytes, "Stream.copy") : 0;
  GilRelease release;
  if (!nbytes)
    stream.copy(*dst_buffer, *src_buffer);
  else if (dst_buffer && src_buffer)
    stream.copy(*dst_buffer, *src_buffer, bytes);
  else if (dst_buffer)
    stream.copy(*dst_buffer, from, bytes);
  else if (src_buffer)
    stream.copy(to, *src_buffer, bytes);
  else
    stream.copy(to, from, bytes);
}

// Stream.fill, as Stream.copy checks a Buffer's range.
void stream_fill(PyStream& self, nb::handle dst, IntArg value, std::optional<IntArg> nbytes) {
  std::shared_ptr<Stream> stream_owner = self.share();
  Stream& stream = *stream_owner;
  void* to = address_of(dst, "Stream.fill");
  uint8_t byte = fill_byte(value);
  note_use(self, stream, dst);
  Buffer* dst_buffer = buffer_of(dst);
  if (!nbytes && !dst_buffer)
    throw Error(ErrorCode::InvalidArgument,
                "Stream.fill: nbytes is required when dst is an address");
  const size_t bytes = nbytes ? byte_count(*nbytes, "Stream.fill") : 0;
  GilRelease release;
  if (!nbytes)
    stream.fill(*dst_buffer, byte);
  else if (dst_buffer)
    stream.fill(*dst_buffer, byte, bytes);
  else
    stream.fill(to, byte, bytes);
}

std::string stream_repr(PyStream& s) {
  if (!s.stream || !*s.stream) return "<accgraph.Stream (closed)>";
  Stream& stream = *s.stream;
  return "<accgraph.Stream " + std::to_string(stream.id()) + " backend='" + stream.backend_name() +
         "' device=" + std::to_string(stream.device()) +
         (stream.is_capturing() ? " capturing" : "") + ">";
}

}  // namespace

void StreamUses::add(const std::shared_ptr<Stream>& stream) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    std::shared_ptr<Stream> known = it->lock();
    if (known == stream) return;
    it = known ? std::next(it) : streams_.erase(it);
  }
  streams_.push_back(stream);
}

void StreamUses::add_all(const StreamUses& other) {
  for (const std::weak_ptr<Stream>& weak : other.streams_)
    if (std::shared_ptr<Stream> stream = weak.lock()) add(stream);
}

void StreamUses::wait_all() const noexcept {
  for (const std::weak_ptr<Stream>& weak : streams_) {
    std::shared_ptr<Stream> stream = weak.lock();
    if (!stream || !*stream) continue;
    try {
      if (stream->is_capturing()) continue;  // nothing to wait for that the capture left
      stream->synchronize();
    } catch (const std::exception& e) {
      log(LogLevel::Warning,
          std::string("accgraph.Buffer: waiting for the work on a stream before freeing a "
                      "buffer it used failed: ") +
              e.what());
    }
  }
}

// Destroying a stream waits for its queued work, which may be a Python host call: whoever
// drops the last reference (the Python object, a call still running when another thread closed
// it, a Buffer's wait) does it without the GIL.
PyStream::PyStream(Stream s)
    : stream(new Stream(std::move(s)), [](Stream* dying) {
        if (Py_IsInitialized() && PyGILState_Check()) {
          GilRelease release;
          delete dying;
        } else {
          delete dying;
        }
      }) {}

PyStream::~PyStream() { stream.reset(); }

Stream& PyStream::get() { return *share(); }

std::shared_ptr<Stream> PyStream::share() {
  if (!stream || !*stream)
    throw Error(ErrorCode::InvalidState, "the stream was closed: create a new Stream");
  return stream;
}

PyBuffer::~PyBuffer() {
  GilRelease release;
  used_on.wait_all();
  buffer.reset();
}

Buffer& PyBuffer::get() {
  if (!buffer) throw Error(ErrorCode::InvalidState, "the buffer was freed: allocate a new Buffer");
  return *buffer;
}

namespace {

using StreamClass = nb::class_<PyStream>;

// Stream(backend, device) and Stream.wrap.
void def_stream_creation(StreamClass& cls) {
  cls.def(
         "__init__",
         [](PyStream* self, std::optional<std::string> backend, IntArg device_arg) {
           const int device = int_arg<int>(device_arg, "Stream: device");
           Stream stream = [&] {
             GilRelease release;
             return Stream::create(backend.value_or(""), device);
           }();
           new (self) PyStream(std::move(stream));
         },
         nb::arg("backend") = nb::none(), nb::arg("device") = 0,
         "A new stream on `backend` (None: the default backend) and `device`.")
      .def_static(
          "wrap",
          [](std::string backend, IntArg device_arg, nb::handle handle) {
            const int device = int_arg<int>(device_arg, "Stream.wrap: device");
            void* native = native_handle_of(handle);
            Stream stream = [&] {
              GilRelease release;
              return Stream::wrap(backend, device, native);
            }();
            auto* py = new PyStream(std::move(stream));
            if (!nb::isinstance<nb::int_>(handle)) py->owner = nb::borrow(handle);
            return py;
          },
          nb::arg("backend"), nb::arg("device"), nb::arg("handle"), nb::rv_policy::take_ownership,
          nb::sig("def wrap(backend: str, device: int, handle: int | typing.Any) -> Stream"),
          "Wraps a native queue without owning it: `handle` is an int (a cudaStream_t, a host "
          "stream's native_handle, ...), an object with an int `cuda_stream` attribute "
          "(torch.cuda.Stream) or one implementing __cuda_stream__(). Such an object is kept "
          "alive by the returned Stream; a native queue given as an int must outlive it.");
}

// The work a stream enqueues: copies, fills, host calls and delays.
void def_stream_enqueue(StreamClass& cls) {
  cls.def("copy", &stream_copy, nb::arg("dst"), nb::arg("src"), nb::arg("nbytes") = nb::none(),
          nb::sig("def copy(self, dst: Buffer | int, src: Buffer | int, nbytes: int | None = "
                  "None) -> None"),
          "Enqueues a copy of `nbytes` bytes from `src` to `dst` (Buffers or int addresses); "
          "without `nbytes`, all of the Buffer `src` into the Buffer `dst`. `nbytes` past a "
          "Buffer's size is an InvalidArgumentError; the range at an int address is the "
          "caller's responsibility (it is not checked).")
      .def("fill", &stream_fill, nb::arg("dst"), nb::arg("value"), nb::arg("nbytes") = nb::none(),
           nb::sig("def fill(self, dst: Buffer | int, value: int, nbytes: int | None = None) -> "
                   "None"),
           "Enqueues setting `nbytes` bytes at `dst` (a Buffer or an int address) to `value` "
           "(0-255); without `nbytes`, the whole Buffer. `nbytes` past the Buffer's size is an "
           "InvalidArgumentError; the range at an int address is the caller's responsibility "
           "(it is not checked).")
      .def(
          "host_call",
          [](PyStream& self, nb::callable fn) {
            std::shared_ptr<Stream> stream_owner = self.share();
            Stream& stream = *stream_owner;
            auto callable = std::make_shared<PythonCallable>(fn, "a host_call callable",
                                                             PythonCallable::Runs::OnBackendThread);
            PyGraph* capturing = PyGraph::capturing_on(stream);
            {
              GilRelease release;
              stream.host_call([callable] { (*callable)(); });
            }
            if (capturing) capturing->captured_calls.push_back(fn.ptr());
          },
          nb::arg("fn"),
          "Enqueues a call of `fn()` (Capabilities.host_calls; UnsupportedError otherwise). It "
          "runs on the backend's thread with the GIL taken; an exception it raises is reported "
          "by the next synchronize() as a BackendError carrying its message and traceback. "
          "Inside a capture it runs at every replay.")
      .def(
          "delay",
          [](PyStream& self, nb::handle duration) {
            std::shared_ptr<Stream> stream_owner = self.share();
            Stream& stream = *stream_owner;
            std::chrono::nanoseconds ns = duration_of(duration);
            GilRelease release;
            stream.delay(ns);
          },
          nb::arg("duration"),
          nb::sig("def delay(self, duration: float | datetime.timedelta) -> None"),
          "Enqueues device work lasting at least `duration` (seconds or a timedelta, 0 to 24 "
          "hours; Capabilities.timed_delay).");
}

// Waiting: on another stream, for the enqueued work, and closing the stream.
void def_stream_ordering(StreamClass& cls) {
  cls.def(
         "wait",
         [](PyStream& self, PyStream& other) {
           std::shared_ptr<Stream> stream_owner = self.share();
           Stream& stream = *stream_owner;
           std::shared_ptr<Stream> origin_owner = other.share();
           Stream& origin = *origin_owner;
           GilRelease release;
           stream.wait(origin);
         },
         nb::arg("other"),
         "This stream waits for the work enqueued on `other` so far. During a capture on "
         "`other` this forks the capture onto this stream; `other.wait(this)` joins it back.")
      .def(
          "synchronize",
          [](PyStream& self) {
            std::shared_ptr<Stream> stream_owner = self.share();
            Stream& stream = *stream_owner;
            GilRelease release;
            stream.synchronize();
          },
          "Blocks (without the GIL) until the enqueued work is done; raises the first failure "
          "since the previous synchronize(). InvalidStateError while capturing.")
      .def(
          "close",
          [](PyStream& self) {
            std::shared_ptr<Stream> closing = std::move(self.stream);  // GIL held: no race
            GilRelease release;
            closing.reset();  // other calls still running keep it until they return
          },
          "Destroys the queue now (after its enqueued work ran), as dropping the last reference "
          "does; a capture that began on it is aborted. Later calls raise InvalidStateError.");
}

// The work a stream enqueues, waiting for it, and closing it.
void def_stream_work(StreamClass& cls) {
  def_stream_enqueue(cls);
  def_stream_ordering(cls);
}

// What a stream is: its state, native handle, device and backend.
void def_stream_properties(StreamClass& cls) {
  cls.def_prop_ro(
         "is_capturing", [](PyStream& self) { return self.get().is_capturing(); },
         "Whether a graph is capturing the work enqueued on this stream.")
      .def_prop_ro(
          "native_handle",
          [](PyStream& self) { return reinterpret_cast<uintptr_t>(self.get().native_handle()); },
          "The native queue (cudaStream_t, ze_command_list_handle_t, ...) as an int.")
      .def_prop_ro(
          "cuda_stream",
          [](PyStream& self) -> uintptr_t {
            std::shared_ptr<Stream> stream_owner = self.share();
            Stream& stream = *stream_owner;
            if (stream.backend_name() != "cuda")
              throw nb::attribute_error("cuda_stream: only a stream of the cuda backend has one");
            return reinterpret_cast<uintptr_t>(stream.native_handle());
          },
          "The cudaStream_t as an int, like torch.cuda.Stream.cuda_stream (cuda streams only; "
          "AttributeError otherwise).")
      .def(
          "__cuda_stream__",
          [](PyStream& self) {
            std::shared_ptr<Stream> stream_owner = self.share();
            Stream& stream = *stream_owner;
            if (stream.backend_name() != "cuda")
              throw Error(ErrorCode::InvalidArgument,
                          "__cuda_stream__: this is a " + stream.backend_name() +
                              " stream; only cuda streams are CUDA streams");
            return nb::make_tuple(0, reinterpret_cast<uintptr_t>(stream.native_handle()));
          },
          nb::sig("def __cuda_stream__(self) -> tuple[int, int]"),
          "The CUDA stream protocol: (0, cudaStream_t as int), cuda streams only.")
      .def_prop_ro(
          "device", [](PyStream& self) { return self.get().device(); }, "The device index.")
      .def_prop_ro(
          "backend", [](PyStream& self) { return self.get().backend_name(); },
          "The backend's name.")
      .def_prop_ro(
          "id", [](PyStream& self) { return self.get().id(); },
          "A process-unique id (one trace track per stream).")
      .def_prop_ro(
          "capabilities", [](PyStream& self) { return self.get().capabilities(); },
          "What the backend can do on this stream's device.")
      .def("__repr__", &stream_repr);
}

using BufferClass = nb::class_<PyBuffer>;

// Buffer(...) and Buffer.allocate: the shapes of the C++ Buffer::allocate overloads.
void def_buffer_allocation(BufferClass& cls) {
  cls.def(
         "__init__",
         [](PyBuffer* self, PyStream& stream, IntArg nbytes, EnumOrName<MemoryKind> kind) {
           auto [buffer, backend, device] = allocate_on(stream, nbytes, kind, "Buffer");
           new (self) PyBuffer(std::move(buffer), std::move(backend), device);
         },
         nb::arg("stream"), nb::arg("nbytes"), nb::arg("kind") = MemoryKind::Device,
         "Allocates `nbytes` bytes on `stream`'s backend and device; `kind` is 'device' or "
         "'host' (or MemoryKind).")
      // The shapes of the C++ Buffer::allocate overloads (one API, one shape).
      .def_static(
          "allocate",
          [](PyStream& stream, IntArg nbytes, EnumOrName<MemoryKind> kind) {
            auto [buffer, backend, device] = allocate_on(stream, nbytes, kind, "Buffer.allocate");
            return new PyBuffer(std::move(buffer), std::move(backend), device);
          },
          nb::arg("stream"), nb::arg("nbytes"), nb::arg("kind") = MemoryKind::Device,
          nb::rv_policy::take_ownership,
          "Allocates `nbytes` bytes on `stream`'s backend and device, as Buffer(stream, nbytes, "
          "kind) does.")
      .def_static(
          "allocate",
          [](std::optional<std::string> backend, IntArg device_arg, IntArg nbytes,
             EnumOrName<MemoryKind> kind) {
            const int device = int_arg<int>(device_arg, "Buffer.allocate: device");
            size_t bytes = byte_count(nbytes, "Buffer.allocate");
            MemoryKind memory = parse_memory_kind(kind);
            std::string name = backend.value_or("");
            auto [buffer, resolved] = [&] {
              GilRelease release;
              std::string chosen = name.empty() ? default_backend_name() : name;
              return std::pair{Buffer::allocate(chosen, device, bytes, memory), chosen};
            }();
            return new PyBuffer(std::move(buffer), resolved, device);
          },
          nb::arg("backend").none(), nb::arg("device"), nb::arg("nbytes"),
          nb::arg("kind") = MemoryKind::Device, nb::rv_policy::take_ownership,
          "Allocates `nbytes` bytes on `backend` (None or '': the default backend) and "
          "`device`, without a stream.");
}

// Its size, address and kind, the buffer protocol and DLPack.
void def_buffer_views(BufferClass& cls) {
  cls.def_prop_ro(
         "nbytes", [](PyBuffer& self) { return self.get().size(); }, "The size in bytes.")
      .def(
          "__len__", [](PyBuffer& self) { return self.get().size(); }, "The size in bytes.")
      .def_prop_ro(
          "ptr", [](PyBuffer& self) { return reinterpret_cast<uintptr_t>(self.get().data()); },
          "The address as an int (Stream.copy/fill take it with an explicit nbytes).")
      .def_prop_ro(
          "kind", [](PyBuffer& self) { return self.get().kind(); }, "MemoryKind.DEVICE or HOST.")
      .def_ro("backend", &PyBuffer::backend, "The backend it was allocated on.")
      .def_ro("device", &PyBuffer::device, "The device index.")
      .def(
          "__dlpack_device__",
          [](PyBuffer& self) {
            self.get();  // raises for a freed buffer
            return nb::make_tuple(self.dlpack.device_type, self.dlpack.device_id);
          },
          nb::sig("def __dlpack_device__(self) -> tuple[int, int]"),
          "The DLPack (device_type, device_id) the backend states for this memory: CPU for "
          "host memory (CUDAHost for cuda's pinned memory), CUDA, oneAPI or Vulkan for the "
          "device memory of cuda, level_zero or vulkan, ExtDev for a plugin that states "
          "none (Note [DLPack devices]).")
      .def(
          "__dlpack__",
          [](nb::handle self, nb::kwargs kwargs) {
            PyBuffer& b = *nb::inst_ptr<PyBuffer>(self);
            Buffer& buffer = b.get();
            size_t shape[1] = {buffer.size()};
            nb::ndarray<nb::array_api, uint8_t, nb::ndim<1>> view(
                buffer.data(), 1, shape, self, nullptr, nb::dtype<uint8_t>(), b.dlpack.device_type,
                b.dlpack.device_id);
            // nanobind's ndarray implements the protocol (versions, dl_device, copy); `stream`
            // is accepted and ignored: synchronize the producing stream first.
            return nb::cast(view).attr("__dlpack__")(**kwargs);
          },
          nb::sig("def __dlpack__(self, **kwargs: typing.Any) -> typing.Any"),
          "Exports the memory as a one-dimensional uint8 DLPack tensor that keeps this Buffer "
          "alive (keywords: max_version, dl_device, copy, stream). Synchronize the stream "
          "that wrote it before the consumer reads it.")
      .def("__repr__", [](PyBuffer& self) {
        if (!self.buffer) return std::string("<accgraph.Buffer (freed)>");
        return "<accgraph.Buffer " + std::to_string(self.buffer->size()) + " bytes " +
               to_string(self.buffer->kind()) + " backend='" + self.backend +
               "' device=" + std::to_string(self.device) + ">";
      });
}

void bind_buffer(nb::module_& m) {
  BufferClass cls(m, "Buffer", nb::type_slots(buffer_slots),
                  "A device or host allocation, freed when the Buffer is dropped "
                  "(accgraph::Buffer).\n\n"
                  "Host-addressable memory supports the buffer protocol "
                  "(memoryview(buf), numpy.asarray(buf) view it without a copy); every "
                  "buffer supports DLPack (numpy.from_dlpack, torch.from_dlpack). A Buffer "
                  "used in a capture is kept alive by the graph until it is reset; dropping a "
                  "Buffer waits for the work enqueued so far on the streams that used it "
                  "(as cudaFree waits for the device).");
  def_buffer_allocation(cls);
  def_buffer_views(cls);
}

}  // namespace

void bind_stream(nb::module_& m) {
  StreamClass cls(m, "Stream",
                  "An in-order queue on one device of one backend (accgraph::Stream).\n\n"
                  "Work enqueued on it runs asynchronously; synchronize() waits for it. "
                  "Graphs and profiler regions refer to the queue, so dropping the Stream "
                  "while a graph captured on it still exists is safe: the capture is "
                  "aborted, and replay() without a stream raises InvalidStateError.\n\n"
                  "    s = accgraph.Stream('host')\n"
                  "    s.fill(buf, 0x2a)\n"
                  "    s.synchronize()");
  def_stream_creation(cls);
  def_stream_work(cls);
  def_stream_properties(cls);
  bind_buffer(m);
}

}  // namespace accgraph::python
