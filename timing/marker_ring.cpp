// MarkerRing (marker_ring.hpp).
#include "marker_ring.hpp"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"

namespace accgraph::timing {

std::shared_ptr<MarkerRing> MarkerRing::create(Backend& backend, const std::string& backend_name,
                                               int device, uint64_t graph_id,
                                               const MarkerOptions& options) {
  std::unique_ptr<TimestampMarkers> markers = backend.create_markers(device, options);
  if (!markers)
    throw Error(ErrorCode::BackendError,
                fmt::format("create_markers returned no marker set for device {}: the backend "
                            "must return markers or throw",
                            device),
                backend_name);
  ReportSource source;
  source.backend = backend_name;
  source.device = device;
  for (const DeviceInfo& info : backend.devices())
    if (info.index == device) source.device_name = info.name;
  source.marker_strategy = markers->strategy();
  source.resolution_ns = markers->resolution_ns();
  return std::make_shared<MarkerRing>(std::move(markers), std::move(source), graph_id);
}

MarkerRing::MarkerRing(std::unique_ptr<TimestampMarkers> markers, ReportSource source,
                       uint64_t graph_id)
    : markers_(std::move(markers)),
      source_(std::move(source)),
      graph_id_(graph_id),
      depth_(std::max<size_t>(1, markers_->ring_depth())) {}

void MarkerRing::begin_sequence(StreamImpl& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  markers_->begin_sequence(stream);
}

void MarkerRing::record(StreamImpl& stream, uint32_t marker) {
  std::lock_guard<std::mutex> lock(mutex_);
  markers_->record(stream, marker);
}

void MarkerRing::end_sequence(StreamImpl& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  markers_->end_sequence(stream);
}

bool MarkerRing::full() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size() >= depth_;
}

void MarkerRing::before_launch(GraphImplInterface& graph, StreamImpl& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  markers_->before_launch(graph, stream, next_sequence_);
}

void MarkerRing::after_launch(GraphImplInterface& graph, StreamImpl& stream,
                              std::shared_ptr<const ReportLayout> layout) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t sequence = next_sequence_;
  markers_->after_launch(graph, stream, sequence);
  ++next_sequence_;
  if (layout) pending_.push_back({sequence, std::move(layout)});
}

void MarkerRing::close_eager_sequence(StreamImpl& stream,
                                      std::shared_ptr<const ReportLayout> layout) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t sequence = next_sequence_++;
  markers_->end_sequence(stream);
  markers_->after_eager_sequence(stream, sequence);
  if (layout) pending_.push_back({sequence, std::move(layout)});
}

std::optional<MarkerRing::Pending> MarkerRing::oldest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_.empty()) return std::nullopt;
  return pending_.front();
}

bool MarkerRing::oldest_complete() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !pending_.empty() && markers_->is_complete(pending_.front().sequence);
}

std::optional<ReplayReport> MarkerRing::collect_oldest() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_.empty()) return std::nullopt;
  // Popped only once read (or failed): until then its slot must not be reused by a new launch,
  // which `full()` guarantees.
  Pending pending = std::move(pending_.front());
  std::exception_ptr failure;
  std::vector<uint64_t> times(pending.layout->marker_count());
  try {
    markers_->wait(pending.sequence);
    markers_->read(pending.sequence, times.data(), times.size());
  } catch (...) {
    failure = std::current_exception();
  }
  pending_.pop_front();
  if (failure) std::rethrow_exception(failure);
  return ReplayReport(std::move(pending.layout), graph_id_, pending.sequence, std::move(times));
}

void MarkerRing::wait_last_launch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_sequence_ > 0) markers_->wait(next_sequence_ - 1);
}

}  // namespace accgraph::timing
