// write_chrome_trace: replay reports as Chrome trace JSON, the trace layout (Note [Trace layout])
// written as "M" (process and thread names) and "X" (slice) events.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ios>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "export_errors.hpp"
#include "exported_text.hpp"
#include "trace_layout.hpp"

namespace accgraph::timing {

namespace {

using detail::append_json_double;
using detail::append_json_string;
using detail::TraceLayout;
using detail::TraceProcess;
using detail::TraceSlice;
using detail::TraceTrack;

// Note [Streaming trace]: the trace is written event by event into a small buffer that goes to
// `out` whenever it holds kChunkBytes, so the document never exists in memory as a whole. The
// order of its events is that of the document the writer built before (one nlohmann::json
// value): the process names in (backend, device) order, then per process (in the order first
// seen) and track its thread names and its "X" events in the layout's order. That order, and
// the stacks' first-fit assignment, are global over all reports (replays of different graphs
// overlap on one stream), so the writer keeps the trace layout's index, one TraceSlice (32
// bytes) per region: O(regions) of index, not O(regions of one report), but no text and no JSON
// tree. Everything else is per process or per track.
constexpr size_t kChunkBytes = 64 * 1024;

// Collects the trace's text and hands it to `out` in chunks (Note [Streaming trace]).
class ChunkWriter {
 public:
  explicit ChunkWriter(std::ostream& out) : out_(out) { buffer_.reserve(kChunkBytes + 4096); }
  std::string& buffer() { return buffer_; }
  // Sends the buffer once it is full; false when `out` has failed (the export stops there).
  bool flush_if_full() { return buffer_.size() < kChunkBytes || flush(); }
  bool flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    return static_cast<bool>(out_);
  }

 private:
  std::ostream& out_;
  std::string buffer_;
};

// Writes one layout as Chrome trace events: a process per TraceProcess, pid in the order first
// seen; a thread per stack of each track ("<track>", then "<track> (overlap <k>)"), tids
// numbered across the whole trace in writing order; ts relative to the earliest start. Every
// string from the reports is written as valid UTF-8 (Note [Exported text]).
class ChromeTraceWriter {
 public:
  ChromeTraceWriter(std::ostream& out, const std::vector<ReplayReport>& reports)
      : reports_(reports),
        layout_(detail::layout_trace(reports, "the Chrome trace")),
        writer_(out),
        buffer_(writer_.buffer()) {}

  void write() {
    buffer_ += "{\"traceEvents\":[";
    for (const TraceProcess& p : layout_.processes) {
      append_metadata_event("process_name", pid(p), 0, "name", [&] {
        append_json_string(buffer_, detail::process_name(p, *p.named_by));
      });
      // What the times ran at (every trace states its timer step and the marker costs taken
      // off, Note [Marker transitions] in report.cpp).
      const ReportSource& source = p.named_by->source();
      append_metadata_event("process_labels", pid(p), 0, "labels", [&] {
        append_json_string(buffer_, fmt::format("timer step {} ns, marker transition {} ns, "
                                                "back to back {} ns",
                                                source.resolution_ns, source.marker_overhead_ns,
                                                source.marker_back_to_back_ns));
      });
    }
    if (!writer_.flush_if_full()) return;
    int next_tid = 1;
    for (const TraceProcess* p : in_order_first_seen())
      for (uint32_t t = p->first_track; t < p->end_track; ++t) {
        if (!write_track(layout_.tracks[t], pid(*p), next_tid)) return;
        next_tid += layout_.tracks[t].stacks;
      }
    buffer_ += "\n],\"displayTimeUnit\":\"ns\"}\n";
    writer_.flush();
  }

 private:
  static int pid(const TraceProcess& p) { return static_cast<int>(p.first_seen) + 1; }

  std::vector<const TraceProcess*> in_order_first_seen() const {
    std::vector<const TraceProcess*> order(layout_.processes.size());
    for (const TraceProcess& p : layout_.processes) order[p.first_seen] = &p;
    return order;
  }

  void begin_event() {
    buffer_ += first_event_ ? "\n" : ",\n";
    first_event_ = false;
  }

  template <class AppendValue>
  void append_metadata_event(const char* name, int pid, int tid, const char* arg,
                             AppendValue&& append_value) {
    begin_event();
    fmt::format_to(std::back_inserter(buffer_),
                   "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":", name,
                   pid, tid, arg);
    append_value();
    buffer_ += "}}";
  }

  // The track's thread names, then its slices; false when `out` failed.
  bool write_track(const TraceTrack& track, int pid, int first_tid) {
    const std::string name = track.name();
    for (int32_t stack = 0; stack < track.stacks; ++stack) {
      append_metadata_event("thread_name", pid, first_tid + stack, "name", [&] {
        append_json_string(buffer_,
                           stack == 0 ? name : fmt::format("{} (overlap {})", name, stack));
      });
      append_metadata_event("thread_sort_index", pid, first_tid + stack, "sort_index", [&] {
        fmt::format_to(std::back_inserter(buffer_), "{}", first_tid + stack);
      });
      if (!writer_.flush_if_full()) return false;
    }
    for (uint32_t s = track.first_slice; s < track.end_slice; ++s) {
      append_slice(layout_.slices[s], pid, first_tid);
      if (!writer_.flush_if_full()) return false;
    }
    return true;
  }

  void append_slice(const TraceSlice& slice, int pid, int first_tid) {
    const ReplayReport& r = reports_[slice.report];
    const RegionTiming t = r.region(slice.region);
    begin_event();
    buffer_ += "{\"name\":";
    append_json_string(buffer_, t.name());
    buffer_ += ",\"cat\":\"";
    buffer_ += detail::slice_category(r);
    buffer_ += "\",\"ph\":\"X\",\"ts\":";
    append_json_double(buffer_, static_cast<double>(t.start_ns() - layout_.origin_ns) / 1000.0);
    buffer_ += ",\"dur\":";
    append_json_double(buffer_, static_cast<double>(t.duration_ns()) / 1000.0);
    fmt::format_to(std::back_inserter(buffer_), ",\"pid\":{},\"tid\":{},\"args\":{{", pid,
                   first_tid + slice.stack);
    const Metadata& metadata = t.metadata();
    for (size_t k = 0; k < metadata.size(); ++k) {
      if (!detail::writes_metadata_entry(metadata, k)) continue;
      append_json_string(buffer_, metadata[k].first);
      buffer_ += ':';
      append_json_string(buffer_, metadata[k].second);
      buffer_ += ',';
    }
    if (t.self_measurable()) {
      buffer_ += "\"self_us\":";
      append_json_double(buffer_, static_cast<double>(t.self_ns()) / 1000.0);
      buffer_ += ',';
    }
    if (t.duration_ns() != t.span_ns()) {  // Note [Marker transitions]
      buffer_ += "\"duration_us\":";
      append_json_double(buffer_, static_cast<double>(t.duration_ns()) / 1000.0);
      buffer_ += ',';
    }
    if (t.raw_duration_ns() != t.duration_ns()) {  // Note [Marker overhead]
      buffer_ += "\"raw_us\":";
      append_json_double(buffer_, static_cast<double>(t.raw_duration_ns()) / 1000.0);
      buffer_ += ',';
    }
    buffer_ += "\"path\":";
    append_json_string(buffer_, t.path());
    fmt::format_to(std::back_inserter(buffer_),
                   ",\"stream\":{},\"graph_id\":{},\"replay_index\":{}}}}}", t.stream_id(),
                   r.graph_id(), r.replay_index());
  }

  const std::vector<ReplayReport>& reports_;
  const TraceLayout layout_;
  ChunkWriter writer_;
  std::string& buffer_;
  bool first_event_ = true;
};

}  // namespace

void write_chrome_trace(std::ostream& out, const std::vector<ReplayReport>& reports) {
  detail::export_to(out, "the Chrome trace", [&] { ChromeTraceWriter(out, reports).write(); });
}

}  // namespace accgraph::timing
