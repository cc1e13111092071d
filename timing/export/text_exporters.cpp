// The text exporters: the statistics as a table, CSV and JSON, the reports as CSV.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "accgraph/version.hpp"
#include "export_errors.hpp"
#include "exported_text.hpp"

namespace accgraph::timing {

namespace {

using detail::append_json_double;
using detail::append_json_string;
using detail::export_to;
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

// A report's marker kernels (Note [Marker kernel names]) in the reports CSV, so that
// annotate_trace can find a GPU run's markers from the CSV alone:
// "record_at_start=A|B;record_at_end=C;end=D", the kinds without names left out; empty where the
// markers are not kernels. Backends' kernel names hold none of '|', ';' and '='.
std::string marker_kernels_text(const MarkerKernels& kernels) {
  std::string text;
  for (const auto& [kind, names] :
       {std::pair{"record_at_start", &kernels.record_at_start},
        std::pair{"record_at_end", &kernels.record_at_end}, std::pair{"end", &kernels.end}}) {
    if (names->empty()) continue;
    text += (text.empty() ? "" : ";") + std::string(kind) + "=";
    for (size_t i = 0; i < names->size(); ++i) text += (i ? "|" : "") + (*names)[i];
  }
  return text;
}

}  // namespace

std::string table_text(std::string_view text) { return table_cell(text).first; }

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
    // A context column (Note [Stats contexts] in timing/model/stats.cpp) only where rows come from
    // more than one: a table of one graph's replays reads as before.
    const bool contexts = std::any_of(stats.begin(), stats.end(), [&](const RegionStats& s) {
      return s.graph_id != stats.front().graph_id || s.first_call != stats.front().first_call;
    });
    out << padded("region", 6)
        << fmt::format("  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}", "count", "min_us",
                       "mean_us", "p50_us", "p95_us", "max_us", "self_p50_us")
        << (contexts ? "  context\n" : "\n");
    for (size_t i = 0; i < stats.size(); ++i) {
      const RegionStats& s = stats[i];
      out << padded(cells[i].first, cells[i].second)
          << fmt::format(
                 "  {:>8}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>12.3f}  {:>12.3f}",
                 s.count, to_us(s.min_ns), to_us(s.mean_ns), to_us(s.p50_ns), to_us(s.p95_ns),
                 to_us(s.max_ns), to_us(s.self_p50_ns));
      if (contexts)
        out << (s.graph_id != 0 ? fmt::format("  graph {}", s.graph_id)
                : s.first_call  ? std::string("  eager, first call")
                                : std::string("  eager"));
      out << '\n';
    }
  });
}

// Note [Stats schema]: the statistics CSV and JSON hold the same facts, one row (one "regions"
// entry) per region path and context, under stats_csv_columns()' names. Columns are appended,
// never renamed or removed, so a reader finds by name what it knows. stats_schema_version() is
// raised only when a field changes meaning (a unit, what a count counts): a reader refuses a
// file of a larger version, naming both, rather than misread it. Version 1 is every file
// written before the version existed (no schema_version column); version 2 added graph_label,
// schema_version and the JSON.
int stats_schema_version() { return 2; }

const std::vector<std::string>& stats_csv_columns() {
  // The context columns (Note [Stats contexts] in timing/model/stats.cpp) come after the first
  // fourteen, so that a reader of those reads them as before; then the graph's replays run and
  // timed (Note [Sampled replays] in spi/untimed_replay.hpp; 0 for eager rows), the graph's
  // label (StatsRun::graph_labels) and the schema's version (Note [Stats schema]).
  static const std::vector<std::string> columns{
      "path",        "depth",       "count",      "min_ns",      "mean_ns",      "p50_ns",
      "p95_ns",      "max_ns",      "self_count", "self_min_ns", "self_mean_ns", "self_p50_ns",
      "self_p95_ns", "self_max_ns", "graph_id",   "first_call",  "p05_ns",       "replays_run",
      "replays_timed", "graph_label", "schema_version"};
  return columns;
}

const std::vector<std::string>& reports_csv_columns() {
  static const std::vector<std::string> columns{
      "graph_id",     "replay_index", "backend",  "device",        "path",        "depth",
      "stream_id",    "lane",         "start_ns", "end_ns",        "duration_ns", "self_ns",
      "raw_start_ns", "raw_end_ns",   "metadata", "marker_kernels"};
  return columns;
}

namespace {

void write_header(std::ostream& out, const std::vector<std::string>& columns) {
  for (size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << columns[i];
  out << '\n';
}

}  // namespace

namespace {

std::map<uint64_t, std::string> labels_by_graph(const StatsRun& run) {
  return {run.graph_labels.begin(), run.graph_labels.end()};
}

}  // namespace

void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats) {
  write_stats_csv(out, stats, StatsRun{});
}

void write_stats_csv(std::ostream& out, const std::vector<RegionStats>& stats,
                     const StatsRun& run) {
  export_to(out, "the statistics CSV", [&] {
    const std::map<uint64_t, std::string> labels = labels_by_graph(run);
    const int version = stats_schema_version();
    write_header(out, stats_csv_columns());
    for (const RegionStats& s : stats) {
      const auto label = s.graph_id != 0 ? labels.find(s.graph_id) : labels.end();
      out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                         csv_field(s.path), s.depth, s.count, s.min_ns, s.mean_ns, s.p50_ns,
                         s.p95_ns, s.max_ns, s.self_count, s.self_min_ns, s.self_mean_ns,
                         s.self_p50_ns, s.self_p95_ns, s.self_max_ns, s.graph_id,
                         s.first_call ? 1 : 0, s.p05_ns, s.replays_run, s.replays_timed,
                         csv_field(label != labels.end() ? label->second : std::string()),
                         version);
    }
  });
}

namespace {

void append_json_key(std::string& text, std::string_view name) {
  append_json_string(text, name);
  text += ':';
}

void append_json_number(std::string& text, std::string_view name, double value) {
  append_json_key(text, name);
  append_json_double(text, value);
}

// The statistics JSON's "devices" entries: one object per device of the run.
void append_stats_devices(std::string& text, const std::vector<ReportSource>& sources) {
  for (size_t i = 0; i < sources.size(); ++i) {
    const ReportSource& source = sources[i];
    text += i ? ",{" : "{";
    append_json_key(text, "backend");
    append_json_string(text, source.backend);
    fmt::format_to(std::back_inserter(text), ",\"device\":{},", source.device);
    append_json_key(text, "device_name");
    append_json_string(text, source.device_name);
    text += ',';
    append_json_key(text, "marker_strategy");
    append_json_string(text, source.marker_strategy);
    fmt::format_to(std::back_inserter(text),
                   ",\"timer_step_ns\":{},\"marker_overhead_ns\":{},"
                   "\"marker_back_to_back_ns\":{}}}",
                   source.resolution_ns, source.marker_overhead_ns,
                   source.marker_back_to_back_ns);
  }
}

// The statistics JSON's "run" object, without its closing brace.
void append_stats_run(std::string& text, const StatsRun& run) {
  fmt::format_to(std::back_inserter(text), ",\"run\":{{\"sample_every\":{},",
                 run.sample_every);
  append_json_number(text, "overhead", run.overhead);
  fmt::format_to(std::back_inserter(text), ",\"sample_seed\":{},\"devices\":[",
                 run.sample_seed);
  append_stats_devices(text, run.sources);
  text += "],\"metadata\":{";
  for (size_t i = 0; i < run.metadata.size(); ++i) {
    if (i) text += ',';
    append_json_key(text, run.metadata[i].first);
    append_json_string(text, run.metadata[i].second);
  }
  text += '}';
}

// The statistics JSON's "graphs" entries.
void append_stats_graphs(std::string& text, const std::vector<RegionStats>& stats,
                         const StatsRun& run, const std::map<uint64_t, std::string>& labels) {
  // Every graph of the statistics, with its replays where the run counted them.
  std::map<uint64_t, const GraphReplays*> graphs;
  for (const RegionStats& s : stats)
    if (s.graph_id != 0) graphs.emplace(s.graph_id, nullptr);
  for (const GraphReplays& g : run.replays) graphs[g.graph_id] = &g;
  bool first = true;
  for (const auto& [id, replays] : graphs) {
    text += first ? "{" : ",{";
    first = false;
    fmt::format_to(std::back_inserter(text), "\"graph_id\":{},", id);
    append_json_key(text, "label");
    const auto label = labels.find(id);
    if (label != labels.end())
      append_json_string(text, label->second);
    else
      text += "null";
    if (replays)
      fmt::format_to(std::back_inserter(text),
                     ",\"replays_run\":{},\"replays_timed\":{},\"sample_every\":{},"
                     "\"sampled\":{}",
                     replays->run, replays->timed, replays->sample_every,
                     replays->sampled ? "true" : "false");
    text += '}';
  }
}

// One region's object of the statistics JSON's "regions".
void append_stats_region(std::string& text, const RegionStats& s) {
  append_json_key(text, "path");
  append_json_string(text, s.path);
  fmt::format_to(std::back_inserter(text),
                 ",\"depth\":{},\"graph_id\":{},\"first_call\":{},\"count\":{},", s.depth,
                 s.graph_id, s.first_call ? "true" : "false", s.count);
  for (const auto& [name, value] :
       {std::pair{"min_ns", s.min_ns}, std::pair{"mean_ns", s.mean_ns},
        std::pair{"p05_ns", s.p05_ns}, std::pair{"p50_ns", s.p50_ns},
        std::pair{"p95_ns", s.p95_ns}, std::pair{"max_ns", s.max_ns}}) {
    append_json_number(text, name, value);
    text += ',';
  }
  fmt::format_to(std::back_inserter(text), "\"self_count\":{},", s.self_count);
  for (const auto& [name, value] :
       {std::pair{"self_min_ns", s.self_min_ns}, std::pair{"self_mean_ns", s.self_mean_ns},
        std::pair{"self_p50_ns", s.self_p50_ns}, std::pair{"self_p95_ns", s.self_p95_ns},
        std::pair{"self_max_ns", s.self_max_ns}}) {
    append_json_number(text, name, value);
    text += ',';
  }
  fmt::format_to(std::back_inserter(text), "\"replays_run\":{},\"replays_timed\":{}}}",
                 s.replays_run, s.replays_timed);
}

}  // namespace

void write_stats_json(std::ostream& out, const std::vector<RegionStats>& stats,
                      const StatsRun& run) {
  export_to(out, "the statistics JSON", [&] {
    const std::map<uint64_t, std::string> labels = labels_by_graph(run);
    std::string text;
    text += "{\"schema\":\"accgraph.stats\",";
    fmt::format_to(std::back_inserter(text), "\"schema_version\":{},", stats_schema_version());
    append_json_key(text, "accgraph_version");
    append_json_string(text, ACCGRAPH_VERSION_STRING);
    append_stats_run(text, run);
    text += "},\"graphs\":[";
    append_stats_graphs(text, stats, run, labels);
    text += "],\"regions\":[";
    out << text;
    for (size_t i = 0; i < stats.size(); ++i) {
      text.clear();
      text += i ? ",\n{" : "\n{";
      append_stats_region(text, stats[i]);
      out << text;
    }
    out << "\n]}\n";
  });
}

void write_reports_csv(std::ostream& out, const std::vector<ReplayReport>& reports) {
  export_to(out, "the reports CSV", [&] {
    write_header(out, reports_csv_columns());
    for (const ReplayReport& r : reports)
      for (const RegionTiming& t : r.regions()) {
        // An unmeasurable region (RegionTiming::measurable) has no times: empty fields; so has
        // an unmeasurable self time (RegionTiming::self_measurable).
        std::string times =
            t.measurable() ? fmt::format("{},{},{},", t.start_ns(), t.end_ns(), t.duration_ns())
                           : ",,,";
        if (t.self_measurable()) times += fmt::format("{}", t.self_ns());
        times += t.measurable() ? fmt::format(",{},{}", t.raw_start_ns(), t.raw_end_ns()) : ",,";
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", r.graph_id(), r.replay_index(),
                           csv_field(r.backend()), r.device(), csv_field(t.path()), t.depth(),
                           t.stream_id(), csv_field(t.lane()), times,
                           csv_field(metadata_text(t.metadata())),
                           csv_field(marker_kernels_text(r.marker_kernels())));
      }
  });
}

}  // namespace accgraph::timing
