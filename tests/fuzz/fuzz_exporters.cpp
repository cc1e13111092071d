// libFuzzer target for the report exporters (report.hpp): reports built from the input (any
// bytes as names, paths, metadata, backend and device names; any start/end times, also
// end < start; depths and parents, also inconsistent ones; several streams) are written as a
// Chrome trace, reports CSV, statistics CSV and table into memory, and read back: the trace
// must parse as JSON with one "X" event per region and valid names kept exactly, each CSV must
// hold a header and one RFC 4180 record per row, the table one line per row. Writing into
// memory cannot fail, so any exception from an exporter is a crash; StatsAccumulator::add may
// reject a report only with accgraph::Error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "accgraph/error.hpp"
#include "accgraph/report.hpp"

using namespace accgraph::timing;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_exporters: %s\n", what.c_str());
  std::abort();
}

void require(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

uint64_t consume_time(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return in.ConsumeIntegralInRange<uint64_t>(0, 1000);  // small: overlaps and nesting
    case 1: return in.ConsumeIntegral<uint64_t>();                  // anything, up to 2^64 - 1
    default: return UINT64_MAX - in.ConsumeIntegralInRange<uint64_t>(0, 1000);
  }
}

std::string consume_text(FuzzedDataProvider& in) { return in.ConsumeRandomLengthString(24); }

ReplayReport consume_report(FuzzedDataProvider& in) {
  ReplayReport r;
  r.graph_id = in.ConsumeIntegralInRange<uint64_t>(0, 3);
  r.replay_index = in.ConsumeIntegral<uint64_t>();
  r.backend = consume_text(in);
  r.device = in.ConsumeIntegral<int>();
  r.device_name = consume_text(in);
  r.marker_strategy = consume_text(in);
  r.resolution_ns = in.ConsumeIntegral<uint64_t>();
  const size_t regions = in.ConsumeIntegralInRange<size_t>(0, 12);
  for (size_t i = 0; i < regions && in.remaining_bytes() > 0; ++i) {
    RegionTiming t;
    t.name = consume_text(in);
    t.path = in.ConsumeBool() ? t.name : consume_text(in);
    t.depth = in.ConsumeIntegralInRange<int>(-2, 5);
    t.parent = in.ConsumeIntegralInRange<int>(-2, 13);
    t.stream_id = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 3)
                                   : in.ConsumeIntegral<uint64_t>();
    t.start_ns = consume_time(in);
    t.end_ns = consume_time(in);
    t.duration_ns = in.ConsumeBool() ? t.end_ns - t.start_ns : in.ConsumeIntegral<uint64_t>();
    const size_t pairs = in.ConsumeIntegralInRange<size_t>(0, 3);
    for (size_t k = 0; k < pairs; ++k) t.metadata.emplace_back(consume_text(in), consume_text(in));
    r.regions.push_back(std::move(t));
  }
  return r;
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

void check_trace(const std::vector<ReplayReport>& reports, size_t regions) {
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
  std::map<std::string, size_t> names;  // of the X events
  size_t complete = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    require(event.is_object() && event.contains("ph") && event.contains("pid") &&
                event.contains("tid") && event.contains("name"),
            "an event lacks ph, pid, tid or name");
    if (event["ph"] != "X") continue;
    ++complete;
    require(event["ts"].is_number() && event["dur"].is_number(), "an X event lacks ts or dur");
    ++names[event["name"].get<std::string>()];
  }
  require(complete == regions, "the trace has " + std::to_string(complete) + " X events for " +
                                   std::to_string(regions) + " regions");
  for (const ReplayReport& r : reports)
    for (const RegionTiming& t : r.regions)
      if (is_valid_utf8(t.name))
        require(names[t.name]-- > 0, "a valid region name did not round-trip: " + t.name);
}

void check_csv(const std::string& text, size_t rows, size_t fields, const char* what) {
  const std::vector<size_t> records = csv_record_sizes(text);
  require(records.size() == rows + 1, std::string(what) + ": " +
                                          std::to_string(records.size()) +
                                          " records for a header and " + std::to_string(rows) +
                                          " rows");
  for (size_t n : records) require(n == fields, std::string(what) + ": a record's field count");
  require(is_valid_utf8(text), std::string(what) + " is not valid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<ReplayReport> reports;
  const size_t count = in.ConsumeIntegralInRange<size_t>(0, 4);
  size_t regions = 0;
  for (size_t i = 0; i < count; ++i) {
    reports.push_back(consume_report(in));
    regions += reports.back().regions.size();
  }

  check_trace(reports, regions);
  check_csv(write_to_memory("write_reports_csv",
                            [&](std::ostream& out) { write_reports_csv(out, reports); }),
            regions, 11, "the reports CSV");

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
  check_csv(write_to_memory("write_stats_csv",
                            [&](std::ostream& out) { write_stats_csv(out, stats); }),
            stats.size(), 8, "the statistics CSV");
  const std::string table = write_to_memory(
      "write_stats_table", [&](std::ostream& out) { write_stats_table(out, stats); });
  size_t lines = 0;
  for (char c : table) lines += c == '\n';
  require(lines == stats.size() + 1, "the table has " + std::to_string(lines) +
                                         " lines for a header and " +
                                         std::to_string(stats.size()) + " rows");
  require(is_valid_utf8(table), "the table is not valid UTF-8");
  return 0;
}
