// Names of the public enumerations, for messages and reports.
#include "accgraph/types.hpp"
#include "accgraph/graph.hpp"

namespace accgraph {

const char* to_string(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::Default:
      return "Default";
    case CaptureMode::Global:
      return "Global";
    case CaptureMode::ThreadLocal:
      return "ThreadLocal";
    case CaptureMode::Relaxed:
      return "Relaxed";
  }
  return "unknown";
}

const char* to_string(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::Device:
      return "device";
    case MemoryKind::Host:
      return "host";
  }
  return "unknown";
}

const char* to_string(GraphState state) noexcept {
  switch (state) {
    case GraphState::Empty:
      return "empty";
    case GraphState::Capturing:
      return "capturing";
    case GraphState::Captured:
      return "captured";
    case GraphState::Instantiated:
      return "instantiated";
  }
  return "unknown";
}

}  // namespace accgraph
