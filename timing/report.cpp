// ReportLayout and ReplayReport: a replay's report is a shared, immutable layout plus that
// replay's marker times; RegionTiming values are made from them on demand.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"
#include "accgraph/spi/backend.hpp"

namespace accgraph::timing {

ReportLayout::ReportLayout(ReportSource source, std::vector<RegionInfo> regions)
    : source_(std::move(source)), regions_(std::move(regions)) {
  uint64_t markers = 0;
  for (size_t i = 0; i < regions_.size(); ++i) {
    RegionInfo& r = regions_[i];
    if (r.parent < -1 || r.parent >= static_cast<int64_t>(i))
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("ReportLayout: region {} ('{}') names parent {}, which is not an "
                              "earlier region: a parent is -1 or the index of a region before it",
                              i, r.name, r.parent));
    if (r.path.empty())
      r.path = r.parent < 0 ? r.name : regions_[static_cast<size_t>(r.parent)].path + "/" + r.name;
    markers =
        std::max<uint64_t>({markers, uint64_t{r.begin_marker} + 1, uint64_t{r.end_marker} + 1});
  }
  marker_count_ = static_cast<uint32_t>(markers);
}

namespace {
const std::shared_ptr<const ReportLayout>& empty_layout() {
  static const std::shared_ptr<const ReportLayout> layout = std::make_shared<ReportLayout>();
  return layout;
}
}  // namespace

ReplayReport::ReplayReport() : layout_(empty_layout()) {}

ReplayReport::ReplayReport(std::shared_ptr<const ReportLayout> layout, uint64_t graph_id,
                           uint64_t replay_index, std::vector<uint64_t> marker_times)
    : layout_(std::move(layout)),
      graph_id_(graph_id),
      replay_index_(replay_index),
      times_(std::move(marker_times)) {
  if (!layout_)
    throw Error(ErrorCode::InvalidArgument,
                "ReplayReport: the layout is null: pass the ReportLayout the times belong to");
  if (times_.size() != layout_->marker_count())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("ReplayReport: {} marker times for a layout of {} markers: pass "
                            "exactly layout->marker_count() times",
                            times_.size(), layout_->marker_count()));
}

ReplayReport ReplayReport::from_samples(ReportSource source, uint64_t graph_id,
                                        uint64_t replay_index, std::vector<RegionSample> samples) {
  std::vector<RegionInfo> regions;
  std::vector<uint64_t> times;
  regions.reserve(samples.size());
  times.reserve(samples.size() * 2);
  constexpr uint64_t kUnmeasurable = TimestampMarkers::kUnmeasurable;
  for (RegionSample& sample : samples) {
    sample.info.begin_marker = static_cast<uint32_t>(times.size());
    sample.info.end_marker = static_cast<uint32_t>(times.size() + 1);
    times.push_back(sample.measurable ? sample.start_ns : kUnmeasurable);
    times.push_back(sample.measurable ? sample.end_ns : kUnmeasurable);
    regions.push_back(std::move(sample.info));
  }
  return ReplayReport(std::make_shared<const ReportLayout>(std::move(source), std::move(regions)),
                      graph_id, replay_index, std::move(times));
}

RegionTiming ReplayReport::region(size_t index) const {
  if (index >= size())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("ReplayReport::region: index {} is out of range: the report has {} "
                            "regions",
                            index, size()));
  return timing_of(index);
}

RegionTiming::RegionTiming(const RegionInfo& info, uint64_t start_ns, uint64_t end_ns)
    : info_(&info) {
  constexpr uint64_t kUnmeasurable = TimestampMarkers::kUnmeasurable;
  measurable_ = start_ns != kUnmeasurable && end_ns != kUnmeasurable;
  if (!measurable_) return;
  start_ns_ = start_ns;
  end_ns_ = end_ns;
}

RegionTiming ReplayReport::timing_of(size_t index) const {
  const RegionInfo& info = layout_->regions()[index];
  return RegionTiming(info, times_[info.begin_marker], times_[info.end_marker]);
}

}  // namespace accgraph::timing
