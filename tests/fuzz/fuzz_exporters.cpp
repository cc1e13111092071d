// libFuzzer target for the report exporters (report.hpp): reports built from the input (any
// bytes as names, paths, lanes, metadata, backend and device names; any start/end times, also
// end < start and the unmeasurable UINT64_MAX; any depths, parents valid or not; several
// streams and lanes; fresh layouts from RegionSample and replays that share an earlier report's
// layout) are written as a Chrome trace, reports CSV, statistics CSV and table into memory, and
// read back: the trace must parse as JSON with exactly one "X" event per measurable region (and
// none for an unmeasurable one) at its exact ts and dur, carrying its stream, on a track named
// after its stream or lane, valid names kept exactly, and every track must nest; each CSV must
// hold a header and one RFC 4180 record per row, the table one line per row. Layouts with a
// parent that is not an earlier region, and marker times of the wrong count, must be rejected
// with InvalidArgument. Writing into memory cannot fail, so any exception from an exporter is a
// crash; StatsAccumulator::add may reject a report only with accgraph::Error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "accgraph/error.hpp"
#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"

using namespace accgraph::timing;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_exporters: %s\n", what.c_str());
  std::abort();
}

void require(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

// Runs `build`, which must throw accgraph::Error InvalidArgument whose message holds `fragment`.
template <class Build>
void require_invalid_argument(const char* what, const char* fragment, Build&& build) {
  try {
    build();
  } catch (const accgraph::Error& e) {
    require(e.code() == accgraph::ErrorCode::InvalidArgument &&
                e.message().find(fragment) != std::string::npos,  // what() stops at a NUL
            std::string(what) + " was rejected with the wrong error: " + e.what());
    return;
  }
  fail(std::string(what) + " was accepted");
}

uint64_t consume_time(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:
      return in.ConsumeIntegralInRange<uint64_t>(0, 1000);  // small: overlaps and nesting
    case 1:
      return in.ConsumeIntegral<uint64_t>();  // anything, up to 2^64 - 1
    // Near the top; UINT64_MAX (TimestampMarkers::kUnmeasurable) makes the region unmeasurable.
    default:
      return UINT64_MAX - in.ConsumeIntegralInRange<uint64_t>(0, 1000);
  }
}

std::string consume_text(FuzzedDataProvider& in) { return in.ConsumeRandomLengthString(24); }

// The key under which each region's metadata names it, so that the trace's X events can be
// matched to their regions: "<layout number>/<region index>" (with the report's replay_index).
const char kRegionKey[] = "fuzz_region";

struct Fuzzed {
  std::vector<ReplayReport> reports;
  std::vector<size_t> layout_number;  // per report
};

// A fresh report (its own layout), or nothing when the input gave a parent that is not an
// earlier region (which from_samples must reject).
void consume_fresh_report(FuzzedDataProvider& in, Fuzzed& out, size_t& layouts) {
  ReportSource source;
  source.backend = consume_text(in);
  source.device = in.ConsumeIntegral<int>();
  source.device_name = consume_text(in);
  source.marker_strategy = consume_text(in);
  source.resolution_ns = in.ConsumeIntegral<uint64_t>();
  // Note [Marker overhead]: the exporters write the edges with it taken off (or not, for a region
  // no longer than it), so nested slices may then reach past their parent's: still valid traces.
  source.marker_overhead_ns = in.ConsumeIntegralInRange<uint64_t>(0, 4096);
  const uint64_t graph_id = in.ConsumeIntegralInRange<uint64_t>(0, 3);
  const uint64_t replay_index = in.ConsumeIntegral<uint64_t>();
  const size_t regions = in.ConsumeIntegralInRange<size_t>(0, 12);
  std::vector<RegionSample> samples;
  bool valid_parents = true;
  for (size_t i = 0; i < regions && in.remaining_bytes() > 0; ++i) {
    RegionSample s;
    RegionInfo& r = s.info;
    r.name = consume_text(in);
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        r.path = r.name;
        break;
      case 1:
        r.path = consume_text(in);
        break;
      default:
        break;  // empty: the layout makes it from the parent's path and the name
    }
    r.depth = in.ConsumeIntegralInRange<int>(-2, 5);  // taken as given, consistent or not
    r.parent = in.ConsumeIntegralInRange<int>(-1, static_cast<int>(i) - 1);
    if (in.ConsumeIntegralInRange<int>(0, 31) == 0) {  // not an earlier region
      r.parent = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(-1000, -2)
                                  : in.ConsumeIntegralInRange<int>(static_cast<int>(i), 1000);
      valid_parents = false;
    }
    r.stream_id = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 3)
                                   : in.ConsumeIntegral<uint64_t>();
    // No lane, a fuzzed one, or "a"/"b": lanes that several regions and streams share.
    if (in.ConsumeBool())
      r.lane = in.ConsumeBool() ? consume_text(in) : std::string(1, static_cast<char>('a' + i % 2));
    const size_t pairs = in.ConsumeIntegralInRange<size_t>(0, 3);
    for (size_t k = 0; k < pairs; ++k) r.metadata.emplace_back(consume_text(in), consume_text(in));
    // Last, so that it wins over a fuzzed key of the same name.
    r.metadata.emplace_back(kRegionKey, std::to_string(layouts) + "/" + std::to_string(i));
    s.start_ns = consume_time(in);
    s.end_ns = consume_time(in);
    s.measurable = in.ConsumeIntegralInRange<int>(0, 15) != 0;
    samples.push_back(std::move(s));
  }
  if (!valid_parents) {
    require_invalid_argument(
        "a layout with a parent that is not an earlier region", "is not an earlier region", [&] {
          ReplayReport::from_samples(std::move(source), graph_id, replay_index, std::move(samples));
        });
    return;
  }
  out.reports.push_back(
      ReplayReport::from_samples(std::move(source), graph_id, replay_index, std::move(samples)));
  out.layout_number.push_back(layouts++);
}

// Another replay of an earlier report's capture: its layout shared, new marker times.
void consume_replay(FuzzedDataProvider& in, Fuzzed& out) {
  const size_t of = in.ConsumeIntegralInRange<size_t>(0, out.reports.size() - 1);
  const std::shared_ptr<const ReportLayout> layout = out.reports[of].shared_layout();
  std::vector<uint64_t> times(layout->marker_count());
  for (uint64_t& t : times) t = consume_time(in);
  const uint64_t graph_id = out.reports[of].graph_id();
  // The first report of this layout's replay_index + the number of its reports so far: unique
  // among them (mod 2^64), so that their X events can be told apart.
  size_t first = out.reports.size(), before = 0;
  for (size_t k = 0; k < out.reports.size(); ++k) {
    if (out.layout_number[k] != out.layout_number[of]) continue;
    first = std::min(first, k);
    ++before;
  }
  const uint64_t replay_index = out.reports[first].replay_index() + before;
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    std::vector<uint64_t> wrong = times;
    if (in.ConsumeBool() || wrong.empty())
      wrong.push_back(consume_time(in));
    else
      wrong.pop_back();
    require_invalid_argument("marker times of the wrong count", "marker times", [&] {
      ReplayReport(layout, graph_id, replay_index, std::move(wrong));
    });
  }
  out.reports.emplace_back(layout, graph_id, replay_index, std::move(times));
  out.layout_number.push_back(out.layout_number[of]);
}

bool is_valid_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// The records of an RFC 4180 text: each record's field count, or a failure.
std::vector<size_t> csv_record_sizes(const std::string& text) {
  std::vector<size_t> records;
  size_t fields = 1;
  bool quoted = false, at_field_start = true, after_quote = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        ++i;
      } else if (c == '"') {
        quoted = false;
        after_quote = true;
      }
      continue;
    }
    if (c == '"') {
      require(at_field_start, "CSV: a quote inside an unquoted field");
      quoted = true;
      at_field_start = false;
    } else if (c == ',') {
      ++fields;
      at_field_start = true;
      after_quote = false;
    } else if (c == '\n') {
      records.push_back(fields);
      fields = 1;
      at_field_start = true;
      after_quote = false;
    } else {
      require(!after_quote, "CSV: text after a closing quote");
      require(c != '\r', "CSV: a carriage return outside quotes");
      at_field_start = false;
    }
  }
  require(!quoted, "CSV: an unterminated quoted field");
  require(at_field_start && fields == 1, "CSV: the last record has no line break");
  return records;
}

template <class Write>
std::string write_to_memory(const char* what, Write&& write) {
  std::ostringstream out;
  try {
    write(out);
  } catch (const std::exception& e) {
    fail(std::string(what) + " threw: " + e.what());
  }
  return out.str();
}

// The trace of `fuzzed`: parses as JSON; exactly one X event per measurable region, none for an
// unmeasurable one, each at its region's exact ts and dur with its name, category, path and
// stream; each on a thread named after the region's stream ("stream <id>") or lane, or that
// name + " (overlap <k>)"; on every thread any two X events are disjoint or one holds the other.
void check_trace(const Fuzzed& fuzzed) {
  const std::vector<ReplayReport>& reports = fuzzed.reports;
  const std::string text = write_to_memory(
      "write_chrome_trace", [&](std::ostream& out) { write_chrome_trace(out, reports); });
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(std::string("the trace is not JSON: ") + e.what());
  }
  require(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array(),
          "the trace has no traceEvents array");

  // (layout number, region index, replay_index) -> (report, region); the earliest start.
  std::map<std::tuple<size_t, size_t, uint64_t>, std::pair<size_t, size_t>> where;
  size_t regions = 0, measurable = 0;
  uint64_t origin = UINT64_MAX;
  for (size_t i = 0; i < reports.size(); ++i) {
    for (size_t k = 0; k < reports[i].size(); ++k) {
      where[{fuzzed.layout_number[i], k, reports[i].replay_index()}] = {i, k};
      ++regions;
      const RegionTiming t = reports[i].region(k);
      if (!t.measurable()) continue;
      ++measurable;
      origin = std::min(origin, t.start_ns());
    }
  }
  require(where.size() == regions, "fuzz_exporters itself: two regions share a key");

  using Track = std::pair<int64_t, int64_t>;  // pid, tid
  std::map<Track, std::string> thread_names;
  struct Placed {
    Track track;
    size_t report, region;
  };
  std::vector<Placed> placed;
  std::map<std::pair<size_t, size_t>, int> events_of;  // X events per region
  for (const nlohmann::json& event : trace["traceEvents"]) {
    require(event.is_object() && event.contains("ph") && event.contains("pid") &&
                event.contains("tid") && event.contains("name") && event["name"].is_string() &&
                event["pid"].is_number_integer() && event["tid"].is_number_integer(),
            "an event lacks ph, pid, tid or name");
    const Track track{event["pid"].get<int64_t>(), event["tid"].get<int64_t>()};
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      require(event.contains("args") && event["args"].contains("name") &&
                  event["args"]["name"].is_string(),
              "a thread_name event has no name");
      require(thread_names.emplace(track, event["args"]["name"].get<std::string>()).second,
              "a thread is named twice");
    }
    if (event["ph"] != "X") continue;
    require(event.contains("ts") && event["ts"].is_number() && event.contains("dur") &&
                event["dur"].is_number(),
            "an X event lacks ts or dur");
    require(event.contains("args") && event["args"].is_object(), "an X event lacks args");
    const nlohmann::json& args = event["args"];
    require(
        args.contains(kRegionKey) && args[kRegionKey].is_string() &&
            args.contains("replay_index") && args["replay_index"].is_number_unsigned() &&
            args.contains("stream") && args["stream"].is_number_integer() &&
            args.contains("path") && args["path"].is_string(),
        "an X event lacks the region key, replay_index, stream or path in args: " + args.dump());
    const std::string key = args[kRegionKey].get<std::string>();
    const size_t slash = key.find('/');
    require(slash != std::string::npos, "an X event's region key is not mine: " + key);
    const auto found =
        where.find({std::stoull(key.substr(0, slash)), std::stoull(key.substr(slash + 1)),
                    args["replay_index"].get<uint64_t>()});
    require(found != where.end(), "an X event names no region: " + key);
    const auto [report, region] = found->second;
    require(++events_of[found->second] == 1, "a region has two X events: " + key);
    const ReplayReport& r = reports[report];
    const RegionTiming t = r.region(region);
    require(t.measurable(), "an unmeasurable region has an X event: " + key);
    require(event["ts"].get<double>() == static_cast<double>(t.start_ns() - origin) / 1000.0,
            "an X event's ts is not its region's start: " + key);
    require(event["dur"].get<double>() == static_cast<double>(t.duration_ns()) / 1000.0,
            "an X event's dur is not its region's duration: " + key);
    require(args["stream"].get<uint64_t>() == t.stream_id(),
            "an X event's args.stream is not its region's stream: " + key);
    require(t.self_measurable()
                ? args.contains("self_us") &&
                      args["self_us"].get<double>() == static_cast<double>(t.self_ns()) / 1000.0
                : !args.contains("self_us"),
            "an X event's args.self_us is not its region's self time: " + key);
    require(event.contains("cat") &&
                event["cat"] == (r.graph_id() == 0 ? std::string("eager")
                                                   : "graph " + std::to_string(r.graph_id())),
            "an X event's cat is not its report's graph: " + key);
    if (is_valid_utf8(t.name()))
      require(event["name"] == t.name(), "a valid region name did not round-trip: " + t.name());
    if (is_valid_utf8(t.path()))
      require(args["path"] == t.path(), "a valid region path did not round-trip: " + t.path());
    placed.push_back({track, report, region});
  }
  require(events_of.size() == measurable, "the trace has X events for " +
                                              std::to_string(events_of.size()) + " of " +
                                              std::to_string(measurable) + " measurable regions");

  // Tracks: named after the stream or the lane; every track nests.
  const auto span = [&](const Placed& p) {
    const RegionTiming t = reports[p.report].region(p.region);
    return std::make_pair(t.start_ns(), t.start_ns() + t.duration_ns());  // as drawn
  };
  for (size_t a = 0; a < placed.size(); ++a) {
    const RegionTiming t = reports[placed[a].report].region(placed[a].region);
    const auto name = thread_names.find(placed[a].track);
    require(name != thread_names.end(), "an X event is on a thread without a name");
    const std::string base =
        t.lane().empty() ? "stream " + std::to_string(t.stream_id()) : t.lane();
    if (is_valid_utf8(base)) {
      const std::string& n = name->second;
      const std::string overlap = base + " (overlap ";
      const bool overlap_track = n.size() > overlap.size() + 1 &&
                                 n.compare(0, overlap.size(), overlap) == 0 && n.back() == ')';
      require(n == base || overlap_track, "a region of stream " + std::to_string(t.stream_id()) +
                                              ", lane '" + t.lane() + "' is on the track '" + n +
                                              "'");
    }
    const auto [a_start, a_end] = span(placed[a]);
    for (size_t b = a + 1; b < placed.size(); ++b) {
      if (placed[b].track != placed[a].track) continue;
      const auto [b_start, b_end] = span(placed[b]);
      const bool disjoint = a_end <= b_start || b_end <= a_start;
      const bool nested =
          (a_start <= b_start && b_end <= a_end) || (b_start <= a_start && a_end <= b_end);
      require(disjoint || nested, "two X events on the track '" + name->second +
                                      "' overlap without nesting: [" + std::to_string(a_start) +
                                      ", " + std::to_string(a_end) + "] and [" +
                                      std::to_string(b_start) + ", " + std::to_string(b_end) + "]");
    }
  }
}

void check_csv(const std::string& text, size_t rows, size_t fields, const char* what) {
  const std::vector<size_t> records = csv_record_sizes(text);
  require(records.size() == rows + 1, std::string(what) + ": " + std::to_string(records.size()) +
                                          " records for a header and " + std::to_string(rows) +
                                          " rows");
  for (size_t n : records) require(n == fields, std::string(what) + ": a record's field count");
  require(is_valid_utf8(text), std::string(what) + " is not valid UTF-8");
}

// The statistics JSON parses, holds one "regions" entry per row in order (a valid UTF-8 path
// unchanged) and carries the schema's version.
void check_stats_json(const std::string& text, const std::vector<RegionStats>& stats) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(std::string("the statistics JSON is not JSON: ") + e.what());
  }
  require(document.value("schema", "") == "accgraph.stats" &&
              document.value("schema_version", 0) == stats_schema_version(),
          "the statistics JSON does not name its schema and version");
  require(document["regions"].is_array() && document["regions"].size() == stats.size(),
          "the statistics JSON has another number of regions than the statistics");
  for (size_t i = 0; i < stats.size(); ++i) {
    const nlohmann::json& region = document["regions"][i];
    require(region["count"] == stats[i].count && region["graph_id"] == stats[i].graph_id &&
                (!is_valid_utf8(stats[i].path) || region["path"] == stats[i].path),
            "a region of the statistics JSON is not the statistics' row");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Fuzzed fuzzed;
  size_t layouts = 0;
  const size_t count = in.ConsumeIntegralInRange<size_t>(0, 4);
  for (size_t i = 0; i < count; ++i) {
    if (!fuzzed.reports.empty() && in.ConsumeBool())
      consume_replay(in, fuzzed);
    else
      consume_fresh_report(in, fuzzed, layouts);
  }
  const std::vector<ReplayReport>& reports = fuzzed.reports;
  size_t regions = 0;
  for (const ReplayReport& r : reports) regions += r.size();

  check_trace(fuzzed);
  check_csv(write_to_memory("write_reports_csv",
                            [&](std::ostream& out) { write_reports_csv(out, reports); }),
            regions, reports_csv_columns().size(), "the reports CSV");

  StatsAccumulator accumulator;
  for (const ReplayReport& r : reports) {
    try {
      accumulator.add(r);
    } catch (const accgraph::Error&) {  // a report the accumulator rejects
    } catch (const std::exception& e) {
      fail(std::string("StatsAccumulator::add threw a foreign exception: ") + e.what());
    }
  }
  const std::vector<RegionStats> stats = accumulator.stats();
  // Each graph labelled with the path of one of its regions: fuzzed text in the label column,
  // the JSON's "graphs" and its metadata.
  StatsRun run;
  for (const RegionStats& s : stats)
    if (s.graph_id != 0) run.graph_labels.emplace_back(s.graph_id, s.path);
  for (const ReplayReport& r : reports) run.sources.push_back(r.source());
  if (!stats.empty()) run.metadata.emplace_back(stats.front().path, stats.back().path);
  check_csv(
      write_to_memory("write_stats_csv", [&](std::ostream& out) { write_stats_csv(out, stats); }),
      stats.size(), stats_csv_columns().size(), "the statistics CSV");
  check_csv(write_to_memory("write_stats_csv",
                            [&](std::ostream& out) { write_stats_csv(out, stats, run); }),
            stats.size(), stats_csv_columns().size(), "the labelled statistics CSV");
  check_stats_json(
      write_to_memory("write_stats_json",
                      [&](std::ostream& out) { write_stats_json(out, stats, run); }),
      stats);
  const std::string table = write_to_memory(
      "write_stats_table", [&](std::ostream& out) { write_stats_table(out, stats); });
  size_t lines = 0;
  for (char c : table) lines += c == '\n';
  require(lines == stats.size() + 1, "the table has " + std::to_string(lines) +
                                         " lines for a header and " + std::to_string(stats.size()) +
                                         " rows");
  require(is_valid_utf8(table), "the table is not valid UTF-8");
  return 0;
}
