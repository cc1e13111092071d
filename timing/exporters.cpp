// The report exporters: a text table and CSV of statistics, CSV of reports, Chrome trace JSON.
#include <algorithm>
#include <cstdint>
#include <ios>
#include <iterator>
#include <limits>
#include <map>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "export_support.hpp"

namespace accgraph::timing {

namespace {

using detail::export_to;
using detail::kReplacement;
using detail::LaneAssigner;
using detail::same_valid_utf8;
using detail::Span;
using detail::utf8_sequence_length;
using detail::valid_utf8;

double to_us(double ns) { return ns / 1000.0; }


// `text` for one cell of the text table: valid UTF-8 with control characters made visible.
// Returns the cell and its width in code points.
std::pair<std::string, size_t> table_cell(std::string_view text) {
  const std::string valid = valid_utf8(text);
  std::string cell;
  size_t width = 0;
  for (size_t i = 0; i < valid.size(); ++width) {
    const auto c = static_cast<unsigned char>(valid[i]);
    if (c < 0x20 || c == 0x7F) {
      cell += fmt::format("\\x{:02x}", c);
      width += 3;
      ++i;
    } else if (c == 0xC2 && static_cast<unsigned char>(valid[i + 1]) < 0xA0) {
      cell += fmt::format("\\u{:04x}", static_cast<unsigned char>(valid[i + 1]));  // C1
      width += 5;
      i += 2;
    } else {
      const size_t length = utf8_sequence_length(std::string_view(valid).substr(i));
      cell.append(valid, i, length);
      i += length;
    }
  }
  return {std::move(cell), width};
}

// RFC 4180: quote a field holding a separator, a quote or a line break; double the quotes.
std::string csv_field(std::string_view raw) {
  const std::string text = valid_utf8(raw);
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string metadata_text(const Metadata& metadata) {
  std::string text;
  for (const auto& [key, value] : metadata) {
    if (!text.empty()) text += ';';
    text += key;
    text += '=';
    text += value;
  }
  return text;
}


}  // namespace

void write_stats_table(std::ostream& out, const std::vector<RegionStats>& stats) {
  export_to(out, "the statistics table", [&] {
    std::vector<std::pair<std::string, size_t>> cells;
    cells.reserve(stats.size());
    size_t width = std::string_view("region").size();
    for (const RegionStats& s : stats) {
      cells.push_back(table_cell(s.path));
      width = std::max(width, cells.back().second);
    }
    // Padded by hand: fmt would count the width of the escaped text differently.
    const auto padded = [&](const std::string& cell, size_t cell_width) {
      return cell + std::string(width - cell_width, ' ');
    };
    out << padded("region", 6)
        << fmt::format("  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}\n", "count", "min_us",
                       "mean_us", "p50_us", "p95_us", "max_us");
    for (size_t i = 0; i < stats.size(); ++i) {
      const RegionStats& s = stats[i];
      out << padded(cells[i].first, cells[i].second)
          << fmt::format("  {:>8}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>12.3f}\n",
                         s.count, to_us(s.min_ns), to_us(s.mean_ns), to_us(s.p50_ns),
                         to_us(s.p95_ns), to_us(s.max_ns));
    }
  });
}

void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats) {
  export_to(out, "the statistics CSV", [&] {
    out << "path,depth,count,min_ns,mean_ns,p50_ns,p95_ns,max_ns\n";
    for (const RegionStats& s : stats)
      out << fmt::format("{},{},{},{},{},{},{},{}\n", csv_field(s.path), s.depth, s.count,
                         s.min_ns, s.mean_ns, s.p50_ns, s.p95_ns, s.max_ns);
  });
}

void write_reports_csv(std::ostream& out, const std::vector<ReplayReport>& reports) {
  export_to(out, "the reports CSV", [&] {
    out << "graph_id,replay_index,backend,device,path,depth,stream_id,lane,start_ns,end_ns,"
           "duration_ns,metadata\n";
    for (const ReplayReport& r : reports)
      for (const RegionTiming& t : r.regions()) {
        // An unmeasurable region (RegionTiming::measurable) has no times: empty fields.
        const std::string times =
            t.measurable ? fmt::format("{},{},{}", t.start_ns, t.end_ns, t.duration_ns) : ",,";
        out << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", r.graph_id(), r.replay_index(),
                           csv_field(r.backend()), r.device(), csv_field(t.path()), t.depth(),
                           t.stream_id(), csv_field(t.lane()), times,
                           csv_field(metadata_text(t.metadata())));
      }
  });
}

namespace {

// Note [Streaming trace]: the trace is written event by event into a small buffer that goes to
// `out` whenever it holds kChunkBytes, so the document never exists in memory as a whole. The
// order of its events is that of the document the writer built before (one nlohmann::json
// value): the process names in (backend, device) order, then per (process, stream) its thread
// names and its "X" events sorted by start. That order, and the overlap tracks' first-fit
// assignment, are global over all reports (replays of different graphs overlap on one stream),
// so the writer keeps one small index entry per region (TraceEntry, 40 bytes, plus a 4-byte
// overlap track number): O(regions) of index, not O(regions of one report), but no text and no JSON
// tree. Everything else is per process or per track.
constexpr size_t kChunkBytes = 64 * 1024;

// Appends `text` to `buffer` as a JSON string: valid UTF-8 (Note [Exported text]), with quotes,
// backslashes and control characters escaped (the latter as \u00XX).
void append_json_string(std::string& buffer, std::string_view text) {
  buffer += '"';
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text.substr(i));
    if (length == 0) {
      buffer += kReplacement;
      ++i;
      continue;
    }
    if (length == 1) {
      const char c = text[i];
      if (c == '"' || c == '\\') {
        buffer += '\\';
        buffer += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        fmt::format_to(std::back_inserter(buffer), "\\u{:04x}", static_cast<unsigned char>(c));
      } else {
        buffer += c;
      }
    } else {
      buffer.append(text, i, length);
    }
    i += length;
  }
  buffer += '"';
}


// Appends a number that parses back to exactly `value`: the shortest round-trip form, with
// ".0" on integral values, as nlohmann::json wrote them (so a reader still sees a float).
void append_json_double(std::string& buffer, double value) {
  const size_t start = buffer.size();
  fmt::format_to(std::back_inserter(buffer), "{}", value);
  if (buffer.find_first_of(".eEn", start) == std::string::npos) buffer += ".0";
}

// A track within a process: a stream's own {false, its id} or a lane's {true, first-seen index
// of the lane in the process}: streams in id order, then lanes in the order first seen. A flag,
// not a bit of the id: every uint64_t is a stream id.
using TrackKey = std::pair<bool, uint64_t>;

// One region in the trace's index (Note [Streaming trace]).
struct TraceEntry {
  uint64_t start_ns, end_ns;
  uint64_t track_id;  // TrackKey::second
  uint32_t report;    // index into the reports
  uint32_t region;    // index into that report's regions
  int pid;
  bool lane_track;    // TrackKey::first
  TrackKey track() const { return {lane_track, track_id}; }
};


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

// Tracks: one process per (backend, device), named "<backend> device <n> (<name>)", because a
// stream is a queue of one device and regions of every graph replayed on it share its
// timeline; one thread per stream ("stream <id>"), plus "stream <id> (overlap <k>)" lanes when
// regions on it overlap without nesting. ts is relative to the earliest start in the export.
// Every string from the reports is written as valid UTF-8 (Note [Exported text]).
void write_chrome_trace_events(std::ostream& out, const std::vector<ReplayReport>& reports) {
  if (reports.size() > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing the Chrome trace of {} reports: at most {} reports fit "
                            "one trace; export fewer reports at a time",
                            reports.size(), std::numeric_limits<uint32_t>::max()));
  // Processes, numbered in the order they first appear (in a region), listed in key order.
  struct Process {
    int pid;
    const ReplayReport* first;  // names the process
    std::vector<std::string_view> lanes;  // in first-seen order
  };
  std::map<std::pair<std::string_view, int>, Process> processes;
  std::vector<Process*> by_pid(1, nullptr);
  std::vector<size_t> first_index(reports.size() + 1, 0);  // of each report's regions
  std::vector<TraceEntry> entries;
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  const auto track_of = [](Process& process, const RegionTiming& t) -> TrackKey {
    if (t.lane().empty()) return {false, t.stream_id()};
    auto& lanes = process.lanes;
    auto found = std::find(lanes.begin(), lanes.end(), std::string_view(t.lane()));
    if (found == lanes.end()) found = lanes.insert(lanes.end(), t.lane());
    return {true, static_cast<uint64_t>(found - lanes.begin())};
  };
  for (size_t i = 0; i < reports.size(); ++i) {
    const ReplayReport& r = reports[i];
    first_index[i + 1] = first_index[i] + r.size();
    if (r.empty()) continue;
    auto [it, added] = processes.try_emplace({r.backend(), r.device()},
                                             Process{static_cast<int>(processes.size()) + 1, &r, {}});
    if (added) by_pid.push_back(&it->second);
    Process& process = it->second;
    uint32_t index = 0;
    for (const RegionTiming& t : r.regions()) {
      // An unmeasurable region has no place in time: it is left out of the trace.
      if (t.measurable) {
        origin = std::min(origin, t.start_ns);
        const TrackKey track = track_of(process, t);
        entries.push_back({t.start_ns, t.end_ns, track.second, static_cast<uint32_t>(i), index,
                           process.pid, track.first});
      }
      ++index;
    }
  }
  // By track, then as the lanes are assigned: start, longer first, shallower first, input order.
  std::sort(entries.begin(), entries.end(), [&](const TraceEntry& a, const TraceEntry& b) {
    const int da = reports[a.report].layout().regions()[a.region].depth;
    const int db = reports[b.report].layout().regions()[b.region].depth;
    return std::make_tuple(a.pid, a.track(), a.start_ns, ~a.end_ns, da, a.report, a.region) <
           std::make_tuple(b.pid, b.track(), b.start_ns, ~b.end_ns, db, b.report, b.region);
  });

  ChunkWriter writer(out);
  std::string& buffer = writer.buffer();
  buffer += "{\"traceEvents\":[";
  bool first_event = true;
  const auto begin_event = [&] {
    buffer += first_event ? "\n" : ",\n";
    first_event = false;
  };
  const auto append_metadata_event = [&](const char* name, int pid, int tid, const char* arg,
                                         auto&& append_value) {
    begin_event();
    fmt::format_to(std::back_inserter(buffer),
                   "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":", name,
                   pid, tid, arg);
    append_value();
    buffer += "}}";
  };

  for (const auto& [key, process] : processes) {
    const ReplayReport& r = *process.first;
    const std::string name =
        r.device_name().empty()
            ? fmt::format("{} device {}", key.first, key.second)
            : fmt::format("{} device {} ({})", key.first, key.second, r.device_name());
    append_metadata_event("process_name", process.pid, 0, "name",
                          [&] { append_json_string(buffer, name); });
  }
  if (!writer.flush_if_full()) return;

  std::vector<int> overlap(first_index.back(), -1);  // per region: first_index + region index
  LaneAssigner assigner;
  int next_tid = 1;
  for (size_t begin = 0; begin < entries.size();) {
    const int pid = entries[begin].pid;
    const TrackKey track = entries[begin].track();
    size_t end = begin;
    assigner.start_stream();
    for (; end < entries.size() && entries[end].pid == pid && entries[end].track() == track; ++end) {
      const TraceEntry& e = entries[end];
      const ReplayReport& r = reports[e.report];
      const int parent = r.layout().regions()[e.region].parent;
      int parent_lane = -1;
      if (parent >= 0) {
        const RegionTiming p = r.region(static_cast<size_t>(parent));
        if (p.measurable && track_of(*by_pid[static_cast<size_t>(pid)], p) == track)
          parent_lane = overlap[first_index[e.report] + static_cast<size_t>(parent)];
      }
      overlap[first_index[e.report] + e.region] = assigner.assign({e.start_ns, e.end_ns}, parent_lane);
    }

    const std::string track_name =
        track.first ? std::string(by_pid[static_cast<size_t>(pid)]->lanes[track.second])
                    : fmt::format("stream {}", track.second);
    const int first_tid = next_tid;
    next_tid += assigner.used();
    for (int lane = 0; lane < assigner.used(); ++lane) {
      append_metadata_event("thread_name", pid, first_tid + lane, "name", [&] {
        append_json_string(buffer, lane == 0 ? track_name
                                             : fmt::format("{} (overlap {})", track_name, lane));
      });
      append_metadata_event("thread_sort_index", pid, first_tid + lane, "sort_index", [&] {
        fmt::format_to(std::back_inserter(buffer), "{}", first_tid + lane);
      });
      if (!writer.flush_if_full()) return;
    }

    for (size_t i = begin; i < end; ++i) {
      const TraceEntry& e = entries[i];
      const ReplayReport& r = reports[e.report];
      const RegionTiming t = r.region(e.region);
      begin_event();
      buffer += "{\"name\":";
      append_json_string(buffer, t.name());
      if (r.graph_id() == 0)
        buffer += ",\"cat\":\"eager\"";
      else
        fmt::format_to(std::back_inserter(buffer), ",\"cat\":\"graph {}\"", r.graph_id());
      buffer += ",\"ph\":\"X\",\"ts\":";
      append_json_double(buffer, static_cast<double>(t.start_ns - origin) / 1000.0);
      buffer += ",\"dur\":";
      append_json_double(buffer, static_cast<double>(t.duration_ns) / 1000.0);
      fmt::format_to(std::back_inserter(buffer), ",\"pid\":{},\"tid\":{},\"args\":{{", pid,
                     first_tid + overlap[first_index[e.report] + e.region]);
      // Metadata: a key repeated (once made valid UTF-8) keeps its last value; path, stream,
      // graph_id and replay_index are the writer's own (each key is written once).
      const Metadata& metadata = t.metadata();
      for (size_t k = 0; k < metadata.size(); ++k) {
        const std::string& key = metadata[k].first;
        bool replaced =
            key == "path" || key == "stream" || key == "graph_id" || key == "replay_index";
        for (size_t later = k + 1; later < metadata.size() && !replaced; ++later)
          replaced = same_valid_utf8(key, metadata[later].first);
        if (replaced) continue;
        append_json_string(buffer, key);
        buffer += ':';
        append_json_string(buffer, metadata[k].second);
        buffer += ',';
      }
      buffer += "\"path\":";
      append_json_string(buffer, t.path());
      fmt::format_to(std::back_inserter(buffer),
                     ",\"stream\":{},\"graph_id\":{},\"replay_index\":{}}}}}", t.stream_id(),
                     r.graph_id(), r.replay_index());
      if (!writer.flush_if_full()) return;
    }
    begin = end;
  }
  buffer += "\n],\"displayTimeUnit\":\"ns\"}\n";
  writer.flush();
}

}  // namespace

void write_chrome_trace(std::ostream& out, const std::vector<ReplayReport>& reports) {
  export_to(out, "the Chrome trace", [&] { write_chrome_trace_events(out, reports); });
}

}  // namespace accgraph::timing
