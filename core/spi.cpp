// Out-of-line members of the backend SPI classes (vtable anchors and the optional operations'
// defaults).
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/capture_tail.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/spi/marker_kernels.hpp"
#include "accgraph/spi/untimed_replay.hpp"

namespace accgraph {

StreamImpl::~StreamImpl() = default;
BufferImpl::~BufferImpl() = default;
GraphImplInterface::~GraphImplInterface() = default;
TimestampMarkers::~TimestampMarkers() = default;
Backend::~Backend() = default;
ClockSampling::~ClockSampling() = default;
CaptureTail::~CaptureTail() = default;
MarkerKernelNames::~MarkerKernelNames() = default;
UntimedReplay::~UntimedReplay() = default;
CapturedWork::~CapturedWork() = default;
DlpackDevices::~DlpackDevices() = default;

CaptureTail* capture_tail_of(StreamImpl& stream) noexcept {
  return dynamic_cast<CaptureTail*>(&stream);
}

UntimedReplay* untimed_replay_of(GraphImplInterface& graph) noexcept {
  return dynamic_cast<UntimedReplay*>(&graph);
}

CapturedWork* captured_work_of(StreamImpl& stream) noexcept {
  return dynamic_cast<CapturedWork*>(&stream);
}

const MarkerKernelNames* marker_kernel_names_of(const TimestampMarkers& markers) noexcept {
  return dynamic_cast<const MarkerKernelNames*>(&markers);
}

void StreamImpl::host_call(std::function<void()>) {
  throw Error(ErrorCode::Unsupported,
              "host_call is not supported by this backend: check capabilities().host_calls first");
}

void StreamImpl::delay(std::chrono::nanoseconds) {
  throw Error(ErrorCode::Unsupported,
              "delay is not supported by this backend: check capabilities().timed_delay first");
}

void TimestampMarkers::before_launch(GraphImplInterface&, StreamImpl&, uint64_t) {}
void TimestampMarkers::after_launch(GraphImplInterface&, StreamImpl&, uint64_t) {}
void TimestampMarkers::after_eager_sequence(StreamImpl&, uint64_t) {}

}  // namespace accgraph
