// write_speedscope: replay reports as speedscope's JSON, one "evented" profile per stack of the
// trace layout's tracks (Note [Trace layout]).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/version.hpp"
#include "export_errors.hpp"
#include "exported_text.hpp"
#include "trace_layout.hpp"

namespace accgraph::timing {

namespace {

using detail::append_json_string;
using detail::TraceLayout;
using detail::TraceProcess;
using detail::TraceSlice;
using detail::TraceTrack;

constexpr size_t kChunkBytes = 64 * 1024;

// Note [Speedscope profiles]: speedscope's evented profile is one call stack: its "O" and "C"
// events come in time order and close in the reverse order they opened. A stack of the trace
// layout is exactly that (its slices nest, sorted by start, parents first), so each becomes one
// profile: before a slice opens, every open slice that ends by its start closes, innermost
// first; at the end the rest close. Frames are shared by all profiles, one per region path
// (named by the region's name, its path as the frame's "file": speedscope tells frames apart by
// both, so "h.0/attn" and "h.1/attn" stay two), and written last, so the profiles stream out as
// they are made (the frames' index is the only text kept: one entry per distinct path).
class SpeedscopeWriter {
 public:
  SpeedscopeWriter(std::ostream& out, const std::vector<ReplayReport>& reports)
      : out_(out), reports_(reports), layout_(detail::layout_trace(reports, what)) {}

  static constexpr const char* what = "the speedscope profile";

  void write() {
    buffer_ += "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",";
    buffer_ += "\"exporter\":\"accgraph " ACCGRAPH_VERSION_STRING "\",\"profiles\":[";
    bool first = true;
    for (const TraceProcess& p : layout_.processes)
      for (uint32_t t = p.first_track; t < p.end_track; ++t)
        for (int32_t stack = 0; stack < layout_.tracks[t].stacks; ++stack) {
          buffer_ += first ? "\n" : ",\n";
          first = false;
          write_profile(p, layout_.tracks[t], stack);
          if (!send_if_full()) return;
        }
    buffer_ += "\n],\"shared\":{\"frames\":[";
    for (size_t f = 0; f < frame_paths_.size(); ++f) {
      buffer_ += f == 0 ? "\n{\"name\":" : ",\n{\"name\":";
      append_json_string(buffer_, frame_names_[f]);
      buffer_ += ",\"file\":";
      append_json_string(buffer_, *frame_paths_[f]);
      buffer_ += '}';
      if (!send_if_full()) return;
    }
    buffer_ += "\n]}}\n";
    send();
  }

 private:
  bool send() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    return static_cast<bool>(out_);
  }
  bool send_if_full() { return buffer_.size() < kChunkBytes || send(); }

  size_t frame_of(const RegionTiming& region) {
    const auto [at, added] = frames_.try_emplace(region.path(), frame_paths_.size());
    if (added) {
      frame_paths_.push_back(&at->first);
      frame_names_.emplace_back(region.name());
    }
    return at->second;
  }

  void write_profile(const TraceProcess& p, const TraceTrack& track, int32_t stack) {
    std::vector<const TraceSlice*> slices;
    for (uint32_t s = track.first_slice; s < track.end_slice; ++s)
      if (layout_.slices[s].stack == stack) slices.push_back(&layout_.slices[s]);
    std::string name = detail::process_name(p, *p.named_by) + ": " + track.name();
    if (stack > 0) name += fmt::format(" (overlap {})", stack);
    uint64_t end_ns = 0;
    for (const TraceSlice* s : slices) end_ns = std::max(end_ns, s->end_ns);
    buffer_ += "{\"type\":\"evented\",\"name\":";
    append_json_string(buffer_, name);
    fmt::format_to(std::back_inserter(buffer_),
                   ",\"unit\":\"nanoseconds\",\"startValue\":{},\"endValue\":{},\"events\":[",
                   slices.empty() ? 0 : slices.front()->start_ns - layout_.origin_ns,
                   end_ns - layout_.origin_ns);
    std::vector<std::pair<uint64_t, size_t>> open;  // (end, frame), innermost last
    bool first = true;
    auto event = [&](char type, size_t frame, uint64_t at_ns) {
      fmt::format_to(std::back_inserter(buffer_), "{}{{\"type\":\"{}\",\"frame\":{},\"at\":{}}}",
                     first ? "" : ",", type, frame, at_ns - layout_.origin_ns);
      first = false;
      send_if_full();  // a failed `out` is reported once the export returns
    };
    for (const TraceSlice* s : slices) {
      while (!open.empty() && open.back().first <= s->start_ns) {
        event('C', open.back().second, open.back().first);
        open.pop_back();
      }
      const size_t frame = frame_of(reports_[s->report].region(s->region));
      event('O', frame, s->start_ns);
      open.emplace_back(s->end_ns, frame);
    }
    for (; !open.empty(); open.pop_back()) event('C', open.back().second, open.back().first);
    buffer_ += "]}";
  }

  std::ostream& out_;
  const std::vector<ReplayReport>& reports_;
  const TraceLayout layout_;
  std::string buffer_;
  std::unordered_map<std::string, size_t> frames_;
  std::vector<const std::string*> frame_paths_;  // by frame index (keys of frames_)
  std::vector<std::string> frame_names_;         // by frame index
};

}  // namespace

void write_speedscope(std::ostream& out, const std::vector<ReplayReport>& reports) {
  detail::export_to(out, SpeedscopeWriter::what,
                    [&] { SpeedscopeWriter(out, reports).write(); });
}

}  // namespace accgraph::timing
