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
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"

namespace accgraph::timing {

namespace {

double to_us(double ns) { return ns / 1000.0; }

// Note [Exported text]: names, paths, metadata, backend and device names come from the caller
// and may hold any bytes. Every exporter writes them as valid UTF-8: a byte that does not
// belong to a well-formed UTF-8 sequence (a stray continuation byte, a truncated sequence, an
// overlong form, a surrogate, a code point above U+10FFFF) becomes U+FFFD, one per byte, so
// valid text round-trips exactly. On top of that, each format escapes what it must: JSON
// escapes control characters, CSV quotes fields per RFC 4180, the text table shows control
// characters as \xNN (\u00NN for C1 controls) so every row stays one line and no terminal
// escape sequence gets through.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at the start of `text`, or 0 if there is none.
size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return length;
}

// `text` as valid UTF-8 (Note [Exported text]).
std::string valid_utf8(std::string_view text) {
  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text.substr(i));
    if (length == 0) {
      result += kReplacement;
      ++i;
    } else {
      result.append(text, i, length);
      i += length;
    }
  }
  return result;
}

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

[[noreturn]] void throw_write_failed(const char* what, const std::ostream& out) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("writing {} failed: the output stream reported an error ({}{}): the "
                          "destination did not take the data (a full disk, a closed pipe) or "
                          "the stream had failed before the call; check the destination and "
                          "write again",
                          what, out.bad() ? "badbit" : "failbit", out.eof() ? ", eofbit" : ""));
}

// Runs an exporter: flushes `out`, throws Error when the stream failed, and turns any other
// exception into an Error too, so callers see one exception family.
template <class Write>
void export_to(std::ostream& out, const char* what, Write&& write) {
  try {
    write();
    out.flush();
  } catch (const Error&) {
    throw;
  } catch (const std::ios_base::failure&) {  // a stream with exceptions() enabled
    throw_write_failed(what, out);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} ran out of memory: export fewer reports at a time", what));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} failed unexpectedly: {}; this is a bug in accgraph: "
                            "please report it with the names and metadata of the exported "
                            "regions",
                            what, e.what()));
  }
  if (!out) throw_write_failed(what, out);
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
    out << "graph_id,replay_index,backend,device,path,depth,stream_id,start_ns,end_ns,"
           "duration_ns,metadata\n";
    for (const ReplayReport& r : reports)
      for (const RegionTiming& t : r.regions) {
        // An unmeasurable region (RegionTiming::measurable) has no times: empty fields.
        const std::string times =
            t.measurable ? fmt::format("{},{},{}", t.start_ns, t.end_ns, t.duration_ns) : ",,";
        out << fmt::format("{},{},{},{},{},{},{},{},{}\n", r.graph_id, r.replay_index,
                           csv_field(r.backend), r.device, csv_field(t.path), t.depth,
                           t.stream_id, times, csv_field(metadata_text(t.metadata)));
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
// so the writer keeps one small index entry per region (TraceEntry, 16 bytes, plus a 4-byte
// track number): O(regions) of index, not O(regions of one report), but no text and no JSON
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

// True when `a` and `b` are the same text once made valid UTF-8 (Note [Exported text]).
bool same_valid_utf8(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const size_t la = utf8_sequence_length(a.substr(i)), lb = utf8_sequence_length(b.substr(j));
    if ((la == 0 ? kReplacement : a.substr(i, la)) != (lb == 0 ? kReplacement : b.substr(j, lb)))
      return false;
    i += la == 0 ? 1 : la;
    j += lb == 0 ? 1 : lb;
  }
  return i == a.size() && j == b.size();
}

// Appends a number that parses back to exactly `value`: the shortest round-trip form, with
// ".0" on integral values, as nlohmann::json wrote them (so a reader still sees a float).
void append_json_double(std::string& buffer, double value) {
  const size_t start = buffer.size();
  fmt::format_to(std::back_inserter(buffer), "{}", value);
  if (buffer.find_first_of(".eEn", start) == std::string::npos) buffer += ".0";
}

// One region in the trace's index (Note [Streaming trace]).
struct TraceEntry {
  const RegionTiming* region;
  uint32_t report;  // index into the reports
  int pid;
};

// Chrome/Perfetto draw the "X" events of one track as a call stack, so on every track each
// event must either contain or follow the ones before it. Regions of one stream can overlap
// without nesting (a region that ends on a stream other than where it began its sibling, two
// replays of different graphs overlapping on one stream id): those move to overflow lanes.
// Greedy first fit over events sorted by start (longer first on ties, so parents precede
// children): a lane keeps the stack of its events still open; an event fits a lane when,
// after popping what ended before it starts, it lies inside the innermost open one.
class LaneAssigner {
 public:
  // Forgets the lanes of the previous stream.
  void start_stream() {
    for (auto& open : lanes_) open.clear();
    used_ = 0;
  }
  // The lane of `r`, the next region of the stream in sorted order; `parent_lane` is the lane
  // of its enclosing region on the same stream, or -1 (none, or not assigned yet).
  int assign(const RegionTiming& r, int parent_lane) {
    size_t lane = 0;
    // A region stays on its parent's track when it fits there (sorting puts parents first).
    if (parent_lane >= 0 && fits(static_cast<size_t>(parent_lane), r)) {
      lane = static_cast<size_t>(parent_lane);
    } else {
      while (lane < used_ && !fits(lane, r)) ++lane;
    }
    if (lane == used_) {
      if (used_ == lanes_.size()) lanes_.emplace_back();
      ++used_;
    }
    lanes_[lane].push_back(&r);
    return static_cast<int>(lane);
  }
  // The number of lanes the stream used.
  int used() const { return static_cast<int>(used_); }

 private:
  bool fits(size_t lane, const RegionTiming& r) {
    auto& open = lanes_[lane];
    // Sorted by start, an open event that ended by the time this one starts (and does not
    // contain it as a zero-length event at its end) can contain no later event either.
    while (!open.empty() && open.back()->end_ns <= r.start_ns && r.end_ns > open.back()->end_ns)
      open.pop_back();
    return open.empty() || r.end_ns <= open.back()->end_ns;
  }

  std::vector<std::vector<const RegionTiming*>> lanes_;  // open events per lane, kept for reuse
  size_t used_ = 0;
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
  };
  std::map<std::pair<std::string_view, int>, Process> processes;
  std::vector<size_t> first_index(reports.size() + 1, 0);  // of each report's regions
  std::vector<TraceEntry> entries;
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < reports.size(); ++i) {
    const ReplayReport& r = reports[i];
    first_index[i + 1] = first_index[i] + r.regions.size();
    if (r.regions.empty()) continue;
    const int pid = processes
                        .try_emplace({r.backend, r.device},
                                     Process{static_cast<int>(processes.size()) + 1, &r})
                        .first->second.pid;
    for (const RegionTiming& t : r.regions) {
      // An unmeasurable region has no place in time: it is left out of the trace.
      if (!t.measurable) continue;
      origin = std::min(origin, t.start_ns);
      entries.push_back({&t, static_cast<uint32_t>(i), pid});
    }
  }
  const auto region_index = [&](const TraceEntry& e) {
    return static_cast<size_t>(e.region - reports[e.report].regions.data());
  };
  // By track, then as the lanes are assigned: start, longer first, shallower first, input order.
  std::sort(entries.begin(), entries.end(), [&](const TraceEntry& a, const TraceEntry& b) {
    const RegionTiming& x = *a.region;
    const RegionTiming& y = *b.region;
    return std::make_tuple(a.pid, x.stream_id, x.start_ns, ~x.end_ns, x.depth, a.report,
                           region_index(a)) <
           std::make_tuple(b.pid, y.stream_id, y.start_ns, ~y.end_ns, y.depth, b.report,
                           region_index(b));
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
        r.device_name.empty()
            ? fmt::format("{} device {}", key.first, key.second)
            : fmt::format("{} device {} ({})", key.first, key.second, r.device_name);
    append_metadata_event("process_name", process.pid, 0, "name",
                          [&] { append_json_string(buffer, name); });
  }
  if (!writer.flush_if_full()) return;

  std::vector<int> lanes(first_index.back(), -1);  // per region, by first_index + region index
  LaneAssigner assigner;
  int next_tid = 1;
  for (size_t begin = 0; begin < entries.size();) {
    const int pid = entries[begin].pid;
    const uint64_t stream_id = entries[begin].region->stream_id;
    size_t end = begin;
    assigner.start_stream();
    for (; end < entries.size() && entries[end].pid == pid &&
           entries[end].region->stream_id == stream_id;
         ++end) {
      const TraceEntry& e = entries[end];
      const ReplayReport& r = reports[e.report];
      const int parent = e.region->parent;
      int parent_lane = -1;
      if (parent >= 0 && static_cast<size_t>(parent) < r.regions.size() &&
          r.regions[parent].stream_id == stream_id && r.regions[parent].measurable)
        parent_lane = lanes[first_index[e.report] + static_cast<size_t>(parent)];
      lanes[first_index[e.report] + region_index(e)] = assigner.assign(*e.region, parent_lane);
    }

    const int first_tid = next_tid;
    next_tid += assigner.used();
    for (int lane = 0; lane < assigner.used(); ++lane) {
      append_metadata_event("thread_name", pid, first_tid + lane, "name", [&] {
        buffer += lane == 0 ? fmt::format("\"stream {}\"", stream_id)
                            : fmt::format("\"stream {} (overlap {})\"", stream_id, lane);
      });
      append_metadata_event("thread_sort_index", pid, first_tid + lane, "sort_index", [&] {
        fmt::format_to(std::back_inserter(buffer), "{}", first_tid + lane);
      });
      if (!writer.flush_if_full()) return;
    }

    for (size_t i = begin; i < end; ++i) {
      const TraceEntry& e = entries[i];
      const ReplayReport& r = reports[e.report];
      const RegionTiming& t = *e.region;
      begin_event();
      buffer += "{\"name\":";
      append_json_string(buffer, t.name);
      if (r.graph_id == 0)
        buffer += ",\"cat\":\"eager\"";
      else
        fmt::format_to(std::back_inserter(buffer), ",\"cat\":\"graph {}\"", r.graph_id);
      buffer += ",\"ph\":\"X\",\"ts\":";
      append_json_double(buffer, static_cast<double>(t.start_ns - origin) / 1000.0);
      buffer += ",\"dur\":";
      append_json_double(buffer, static_cast<double>(t.duration_ns) / 1000.0);
      fmt::format_to(std::back_inserter(buffer), ",\"pid\":{},\"tid\":{},\"args\":{{", pid,
                     first_tid + lanes[first_index[e.report] + region_index(e)]);
      // Metadata: a key repeated (once made valid UTF-8) keeps its last value; path, graph_id
      // and replay_index are the writer's own (each key is written once).
      for (size_t k = 0; k < t.metadata.size(); ++k) {
        const std::string& key = t.metadata[k].first;
        bool replaced = key == "path" || key == "graph_id" || key == "replay_index";
        for (size_t later = k + 1; later < t.metadata.size() && !replaced; ++later)
          replaced = same_valid_utf8(key, t.metadata[later].first);
        if (replaced) continue;
        append_json_string(buffer, key);
        buffer += ':';
        append_json_string(buffer, t.metadata[k].second);
        buffer += ',';
      }
      buffer += "\"path\":";
      append_json_string(buffer, t.path);
      fmt::format_to(std::back_inserter(buffer), ",\"graph_id\":{},\"replay_index\":{}}}}}",
                     r.graph_id, r.replay_index);
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
