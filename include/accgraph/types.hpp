// Value types shared by the user API and the backend SPI: capture modes, pools, graph arguments,
// memory kinds, devices and capabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "accgraph/export.hpp"

namespace accgraph {

/// A marker time that could not be determined (a backend's TimestampMarkers::read() gives it,
/// e.g. when the device counter may have wrapped more than once since the sequence began): a
/// region that starts or ends at it is unmeasurable, and the statistics leave it out. The one
/// definition; TimestampMarkers::kUnmeasurable (accgraph/spi/backend.hpp) is this value.
inline constexpr uint64_t kUnmeasurable = UINT64_MAX;

/// How a capture treats potentially unsafe calls made by other threads while it runs (CUDA's
/// cudaStreamCaptureMode). Default is the backend's documented default (Global on every in-tree
/// backend). A mode the backend does not honour is an Unsupported error, never a silent fallback.
enum class CaptureMode { Default, Global, ThreadLocal, Relaxed };

ACCGRAPH_API const char* to_string(CaptureMode mode) noexcept;

/// Identifies a memory pool that graphs draw captured allocations from (PyTorch's MempoolId_t).
/// {0, 0} asks the backend for a new private pool; passing another graph's pool() shares it.
struct PoolId {
  uint64_t first = 0;
  uint64_t second = 0;

  bool is_new_private() const noexcept { return first == 0 && second == 0; }
  friend bool operator==(const PoolId& a, const PoolId& b) noexcept {
    return a.first == b.first && a.second == b.second;
  }
  friend bool operator!=(const PoolId& a, const PoolId& b) noexcept { return !(a == b); }
};

/// Options for a new graph; extended by appending fields.
struct GraphArgs {
  /// Keep the captured (template) graph after capture_end instead of instantiating at once and
  /// dropping it; instantiation then happens on instantiate() or the first replay().
  bool keep_graph = false;
};

/// Where a Buffer lives. Host memory is readable by the CPU and usable by the device's copies.
enum class MemoryKind { Device, Host };

ACCGRAPH_API const char* to_string(MemoryKind kind) noexcept;

struct DeviceInfo {
  int index = 0;
  std::string name;
};

/// What a backend can do on a device. Queried, never guessed: features not listed are
/// Unsupported errors when used.
struct Capabilities {
  std::vector<CaptureMode> capture_modes;      ///< modes honoured besides Default
  bool multi_stream_capture = false;           ///< fork/join during capture through Stream::wait
  bool host_calls = false;                     ///< Stream::host_call, eagerly and in graphs
  bool timed_delay = false;                    ///< Stream::delay (device work of a given duration)
  bool graph_update = false;                   ///< re-capture updates the executable in place
  bool pool_sharing = false;                   ///< graphs share a pool through PoolId
  std::vector<std::string> marker_strategies;  ///< timestamp marker kinds, default first
  size_t marker_ring_depth = 0;                ///< replays in flight with distinct marker storage
  uint64_t timer_resolution_ns = 0;            ///< smallest step of the marker clock

  bool supports(CaptureMode mode) const noexcept {
    if (mode == CaptureMode::Default) return true;
    for (CaptureMode m : capture_modes)
      if (m == mode) return true;
    return false;
  }
};

/// Counters a graph implementation may expose (AcceleratorGraph::stats(), debug output;
/// GraphImplInterface::stats() in accgraph/spi/backend.hpp fills them).
struct GraphStats {
  uint64_t nodes = 0;           ///< operations in the captured graph, when known
  uint64_t instantiations = 0;  ///< executables built from scratch
  uint64_t updates = 0;         ///< executables updated in place after a re-capture
};

}  // namespace accgraph
