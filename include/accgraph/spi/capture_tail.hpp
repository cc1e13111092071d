// SPI for backends: the capture tail, how a backend tells the timing layer exactly whether
// anything was enqueued on a capturing stream since a marker (the optional CaptureTail
// interface a StreamImpl may also derive from).
#pragma once

#include <cstdint>

#include "accgraph/export.hpp"

namespace accgraph {

class StreamImpl;

/// Note [Capture tail]: optional, for a StreamImpl whose queue can also receive work accgraph
/// does not see (a wrapped framework stream, a native handle handed out: Note [Native work] in
/// core/stream.cpp). Two region boundaries share one marker only when nothing was enqueued
/// between them; on such a stream only the backend knows, and only while it captures. A
/// StreamImpl class that also derives from CaptureTail answers; without it, boundaries on such
/// streams never share a marker (exact, one marker more), and nothing else changes.
/// - (capture.tail) capture_tail() returns, while the stream captures, a non-zero token naming
///   the capture's current tail on this stream (CUDA: the single node the next captured
///   operation would depend on, from cudaStreamGetCaptureInfo). Two calls return the same token
///   if and only if nothing was enqueued on the stream between them (by accgraph or natively),
///   and no other stream joined into it. It returns 0 when it cannot tell (the stream is not
///   capturing, the tail is several nodes, the native call failed): 0 never equals a token.
///   It enqueues nothing, never blocks, and may be called from any thread that may enqueue.
class ACCGRAPH_API CaptureTail {
 public:
  virtual ~CaptureTail();
  virtual uint64_t capture_tail() const noexcept = 0;
};

/// The CaptureTail of `stream`, or nullptr when its class does not implement it (the core asks
/// once per stream, when it creates or wraps it).
ACCGRAPH_API CaptureTail* capture_tail_of(StreamImpl& stream) noexcept;

}  // namespace accgraph
