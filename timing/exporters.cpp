// The report exporters: a text table and CSV of statistics, CSV of reports, Chrome trace JSON.
#include <algorithm>
#include <ios>
#include <limits>
#include <map>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

struct TraceEvent {
  const ReplayReport* report;
  const RegionTiming* region;
  size_t order;  // position in the input, the last tie-breaker
  const TraceEvent* parent = nullptr;  // the enclosing region's event, when on the same stream
  int lane = -1;  // 0 = the stream's own track, 1.. = overflow tracks; -1 = not yet assigned
};

// Chrome/Perfetto draw the "X" events of one track as a call stack, so on every track each
// event must either contain or follow the ones before it. Regions of one stream can overlap
// without nesting (a region that ends on a stream other than where it began its sibling, two
// replays of different graphs overlapping on one stream id): those move to overflow lanes.
// Greedy first fit over events sorted by start (longer first on ties, so parents precede
// children): a lane keeps the stack of its events still open; an event fits a lane when,
// after popping what ended before it starts, it lies inside the innermost open one.
void assign_lanes(std::vector<TraceEvent*>& events) {
  std::sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
    return std::make_tuple(a->region->start_ns, ~a->region->end_ns, a->region->depth, a->order) <
           std::make_tuple(b->region->start_ns, ~b->region->end_ns, b->region->depth, b->order);
  });
  std::vector<std::vector<const RegionTiming*>> lanes;  // open events per lane
  auto fits = [&](size_t lane, const RegionTiming& r) {
    auto& open = lanes[lane];
    // Sorted by start, an open event that ended by the time this one starts (and does not
    // contain it as a zero-length event at its end) can contain no later event either.
    while (!open.empty() && open.back()->end_ns <= r.start_ns && r.end_ns > open.back()->end_ns)
      open.pop_back();
    return open.empty() || r.end_ns <= open.back()->end_ns;
  };
  for (TraceEvent* event : events) {
    const RegionTiming& r = *event->region;
    // A region stays on its parent's track when it fits there (sorting puts parents first).
    size_t lane = 0;
    if (event->parent != nullptr && event->parent->lane >= 0 &&
        fits(static_cast<size_t>(event->parent->lane), r)) {
      lane = static_cast<size_t>(event->parent->lane);
    } else {
      while (lane < lanes.size() && !fits(lane, r)) ++lane;
    }
    if (lane == lanes.size()) lanes.emplace_back();
    lanes[lane].push_back(&r);
    event->lane = static_cast<int>(lane);
  }
}

// Tracks: one process per (backend, device), named "<backend> device <n> (<name>)", because a
// stream is a queue of one device and regions of every graph replayed on it share its
// timeline; one thread per stream ("stream <id>"), plus "stream <id> (overlap <k>)" lanes when
// regions on it overlap without nesting. ts is relative to the earliest start in the export.
// Every string from the reports goes through valid_utf8 (Note [Exported text]).
void write_chrome_trace_document(std::ostream& out, const std::vector<ReplayReport>& reports) {
  std::vector<TraceEvent> events;
  size_t total = 0;
  for (const ReplayReport& r : reports) total += r.regions.size();
  events.reserve(total);  // parent pointers point into it
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (const ReplayReport& r : reports) {
    const size_t first = events.size();
    for (const RegionTiming& t : r.regions) {
      events.push_back({&r, &t, events.size()});
      if (t.measurable) origin = std::min(origin, t.start_ns);
    }
    for (size_t i = first; i < events.size(); ++i) {
      int parent = events[i].region->parent;
      if (parent >= 0 && static_cast<size_t>(parent) < r.regions.size() &&
          r.regions[parent].stream_id == events[i].region->stream_id &&
          r.regions[parent].measurable)
        events[i].parent = &events[first + static_cast<size_t>(parent)];
    }
  }

  using ProcessKey = std::pair<std::string, int>;
  std::map<ProcessKey, int> pids;
  std::map<ProcessKey, std::string> process_names;
  std::map<std::pair<int, uint64_t>, std::vector<TraceEvent*>> by_stream;
  for (TraceEvent& e : events) {
    ProcessKey key{e.report->backend, e.report->device};
    auto [it, inserted] = pids.emplace(key, 0);
    if (inserted) {
      it->second = static_cast<int>(pids.size());
      process_names[key] = valid_utf8(
          e.report->device_name.empty()
              ? fmt::format("{} device {}", key.first, key.second)
              : fmt::format("{} device {} ({})", key.first, key.second, e.report->device_name));
    }
    // An unmeasurable region has no place in time: it is left out of the trace.
    if (e.region->measurable) by_stream[{it->second, e.region->stream_id}].push_back(&e);
  }

  nlohmann::json trace_events = nlohmann::json::array();
  for (const auto& [key, pid] : pids)
    trace_events.push_back({{"name", "process_name"},
                            {"ph", "M"},
                            {"pid", pid},
                            {"tid", 0},
                            {"args", {{"name", process_names[key]}}}});

  int next_tid = 1;
  for (auto& [key, stream_events] : by_stream) {
    const auto [pid, stream_id] = key;
    assign_lanes(stream_events);
    int lanes = 0;
    for (const TraceEvent* e : stream_events) lanes = std::max(lanes, e->lane + 1);
    const int first_tid = next_tid;
    next_tid += lanes;
    for (int lane = 0; lane < lanes; ++lane) {
      std::string name = lane == 0 ? fmt::format("stream {}", stream_id)
                                   : fmt::format("stream {} (overlap {})", stream_id, lane);
      trace_events.push_back({{"name", "thread_name"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", first_tid + lane},
                              {"args", {{"name", name}}}});
      trace_events.push_back({{"name", "thread_sort_index"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", first_tid + lane},
                              {"args", {{"sort_index", first_tid + lane}}}});
    }
    for (const TraceEvent* e : stream_events) {
      const RegionTiming& t = *e->region;
      nlohmann::json args = nlohmann::json::object();
      for (const auto& [k, v] : t.metadata) args[valid_utf8(k)] = valid_utf8(v);
      args["path"] = valid_utf8(t.path);
      args["graph_id"] = e->report->graph_id;
      args["replay_index"] = e->report->replay_index;
      trace_events.push_back(
          {{"name", valid_utf8(t.name)},
           {"cat", e->report->graph_id == 0 ? std::string("eager")
                                            : fmt::format("graph {}", e->report->graph_id)},
           {"ph", "X"},
           {"ts", static_cast<double>(t.start_ns - origin) / 1000.0},
           {"dur", static_cast<double>(t.duration_ns) / 1000.0},
           {"pid", pid},
           {"tid", first_tid + e->lane},
           {"args", std::move(args)}});
    }
  }

  nlohmann::json document = {{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ns"}};
  out << document.dump(1) << '\n';
}

}  // namespace

void write_chrome_trace(std::ostream& out, const std::vector<ReplayReport>& reports) {
  export_to(out, "the Chrome trace", [&] { write_chrome_trace_document(out, reports); });
}

}  // namespace accgraph::timing
