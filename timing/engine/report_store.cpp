// ReportStore (report_store.hpp).
#include "report_store.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "utf8.hpp"

namespace accgraph::timing {

void ReportStore::add_sink(Sink sink) {
  if (!sink)
    throw Error(ErrorCode::InvalidArgument, "add_sink: the sink is empty: pass a callable");
  std::lock_guard<std::mutex> lock(mutex_);
  auto next = std::make_shared<std::vector<Sink>>(*sinks_);
  next->push_back(std::move(sink));
  sinks_ = std::move(next);
}

void ReportStore::deliver(ReplayReport&& report) {
  std::shared_ptr<const std::vector<Sink>> sinks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sinks = sinks_;
  }
  if (collect_stats_) stats_.add(report);
  delivered_.fetch_add(1, std::memory_order_relaxed);
  for (const Sink& sink : *sinks) {
    try {
      sink(report);
    } catch (const std::exception& e) {
      log(LogLevel::Warning, fmt::format("timing: a report sink threw for graph {} replay {}: {}",
                                         report.graph_id(), report.replay_index(), e.what()));
    } catch (...) {
      log(LogLevel::Warning,
          fmt::format("timing: a report sink threw a non-standard exception for graph {} replay {}",
                      report.graph_id(), report.replay_index()));
    }
  }
  if (keep_ == 0) return;
  auto kept = std::make_shared<const ReplayReport>(std::move(report));
  std::lock_guard<std::mutex> lock(mutex_);
  kept_.push_back(std::move(kept));
  if (kept_.size() > keep_) kept_.pop_front();
}

std::vector<ReplayReport> ReportStore::reports() const {
  std::deque<std::shared_ptr<const ReplayReport>> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kept = kept_;
  }
  std::vector<ReplayReport> result;
  result.reserve(kept.size());
  for (const auto& report : kept) result.push_back(*report);
  return result;
}

void ReportStore::note_untimed(std::string name, std::string reason) {
  std::lock_guard<std::mutex> lock(untimed_mutex_);
  auto found = std::find_if(untimed_.begin(), untimed_.end(),
                            [&](const UntimedCalls& u) { return u.reason == reason; });
  if (found != untimed_.end()) {
    ++found->count;
    return;
  }
  untimed_.push_back(UntimedCalls{std::move(reason), 1, std::move(name)});
}

std::vector<UntimedCalls> ReportStore::untimed() const {
  std::lock_guard<std::mutex> lock(untimed_mutex_);
  return untimed_;
}

std::string ReportStore::untimed_lines() const {
  std::string lines;
  for (const UntimedCalls& u : untimed())
    lines += fmt::format("untimed: {} call(s) not timed: {} (first: {})\n", u.count,
                         ::accgraph::detail::valid_utf8(u.reason),
                         ::accgraph::detail::valid_utf8(u.first_name));
  return lines;
}

}  // namespace accgraph::timing
