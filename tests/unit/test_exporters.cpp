// Tests of the exporters' robustness (report.hpp): names and metadata that are not valid UTF-8 or
// hold control characters, output streams that fail, and only accgraph::Error escaping.
// test_report.cpp covers what the exporters write for ordinary input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accgraph/exporters.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "accgraph/trace_file.hpp"
#include "check_error.hpp"

using namespace accgraph::timing;
using accgraph::ErrorCode;

namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

// Each input name, and what every exporter must write for it.
struct NameCase {
  std::string input;
  std::string expected;
};

const std::vector<NameCase>& name_cases() {
  static const std::vector<NameCase> cases = {
      {"plain", "plain"},
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
      {"truncated\xC3", "truncated" + kFFFD},            // audit 2.24's byte
      {"\xFF\xFE", kFFFD + kFFFD},                       // never valid
      {"stray\x80", "stray" + kFFFD},                    // a lone continuation byte
      {"overlong\xC0\xAF", "overlong" + kFFFD + kFFFD},  // '/' as two bytes
      {"surrogate\xED\xA0\x80", "surrogate" + kFFFD + kFFFD + kFFFD},
      {"too big\xF4\x90\x80\x80", "too big" + kFFFD + kFFFD + kFFFD + kFFFD},
      {"cut\xE2\x82", "cut" + kFFFD + kFFFD},
      {"ctrl\x01\t\n\r\x1b[31m\x7f", "ctrl\x01\t\n\r\x1b[31m\x7f"},  // valid UTF-8: unchanged
      {std::string("nul\0byte", 8), std::string("nul\0byte", 8)},
  };
  return cases;
}

RegionSample region(std::string name, uint64_t start, uint64_t end, Metadata metadata = {}) {
  RegionSample r;
  r.info.name = name;
  r.info.path = std::move(name);
  r.info.stream_id = 1;
  r.info.metadata = std::move(metadata);
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

ReplayReport report_of(std::vector<RegionSample> regions) {
  ReportSource source;
  source.backend = "host";
  source.device_name = "cpu\xC3";
  return ReplayReport::from_samples(std::move(source), 1, 0, std::move(regions));
}

// One report with a region per name case, each with its name as a metadata key and value too.
ReplayReport report_with_every_name() {
  std::vector<RegionSample> regions;
  uint64_t t = 0;
  for (const NameCase& c : name_cases()) {
    regions.push_back(region(c.input, t, t + 10, {{"key " + c.input, "value " + c.input}}));
    t += 100;
  }
  return report_of(std::move(regions));
}

// The records of an RFC 4180 CSV text, each a list of fields.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      fields.push_back(std::move(field));
      field.clear();
      records.push_back(std::move(fields));
      fields.clear();
    } else {
      field += c;
    }
  }
  REQUIRE_MESSAGE(!quoted, "unterminated quoted field");
  REQUIRE_MESSAGE(field.empty(), "the last record has no line break");
  return records;
}

// A stream buffer that refuses every byte, like a full disk.
struct RefusingBuffer : std::streambuf {
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

// A stream buffer that takes the bytes but fails to flush them (like a failing fsync or close).
struct FailingSyncBuffer : std::streambuf {
  std::string taken;
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) taken += traits_type::to_char_type(c);
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    taken.append(s, static_cast<size_t>(n));
    return n;
  }
  int sync() override { return -1; }
};

using Exporter = void (*)(std::ostream&, const ReplayReport&);

struct NamedExporter {
  const char* what;  // as in the error message
  Exporter write;
};

const std::vector<NamedExporter>& exporters() {
  static const std::vector<NamedExporter> all = {
      {"the Chrome trace",
       [](std::ostream& out, const ReplayReport& r) { write_chrome_trace(out, {r}); }},
      {"the reports CSV",
       [](std::ostream& out, const ReplayReport& r) { write_reports_csv(out, {r}); }},
      {"the statistics CSV",
       [](std::ostream& out, const ReplayReport& r) {
         StatsAccumulator acc;
         acc.add(r);
         write_stats_csv(out, acc.stats());
       }},
      {"the statistics table",
       [](std::ostream& out, const ReplayReport& r) {
         StatsAccumulator acc;
         acc.add(r);
         write_stats_table(out, acc.stats());
       }},
  };
  return all;
}

}  // namespace

TEST_CASE("chrome trace: invalid UTF-8 becomes U+FFFD per byte, valid names round-trip exactly") {
  std::ostringstream out;
  write_chrome_trace(out, {report_with_every_name()});  // audit 2.24: threw json type_error 316
  const nlohmann::json trace = nlohmann::json::parse(out.str());
  std::vector<nlohmann::json> events;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e["ph"] == "X") events.push_back(e);
  REQUIRE(events.size() == name_cases().size());
  for (size_t i = 0; i < events.size(); ++i) {
    const NameCase& c = name_cases()[i];
    CAPTURE(c.expected);
    CHECK(events[i]["name"].get<std::string>() == c.expected);
    CHECK(events[i]["args"]["path"].get<std::string>() == c.expected);
    CHECK(events[i]["args"]["key " + c.expected].get<std::string>() == "value " + c.expected);
  }
  bool process_named = false;
  for (const nlohmann::json& e : trace["traceEvents"])
    if (e["name"] == "process_name")
      process_named = e["args"]["name"].get<std::string>() == "host device 0 (cpu" + kFFFD + ")";
  CHECK(process_named);
}

TEST_CASE("reports csv: invalid UTF-8 replaced, control characters kept inside quoted fields") {
  std::ostringstream out;
  write_reports_csv(out, {report_with_every_name()});
  const auto records = parse_csv(out.str());
  REQUIRE(records.size() == 1 + name_cases().size());
  for (size_t i = 0; i < name_cases().size(); ++i) {
    const NameCase& c = name_cases()[i];
    CAPTURE(c.expected);
    REQUIRE(records[1 + i].size() == 16);
    CHECK(records[1 + i][4] == c.expected);
    CHECK(records[1 + i][14] == "key " + c.expected + "=value " + c.expected);
  }
}

TEST_CASE("stats csv: paths with separators, quotes, line breaks and invalid UTF-8") {
  StatsAccumulator acc;
  acc.add(report_of({region("a,b", 0, 1), region("say \"hi\"", 0, 1), region("two\r\nlines", 0, 1),
                     region("bad\xC3,byte", 0, 1)}));
  std::ostringstream out;
  write_stats_csv(out, acc.stats());
  CHECK(out.str().find("\"two\r\nlines\"") != std::string::npos);
  const auto records = parse_csv(out.str());
  REQUIRE(records.size() == 5);
  CHECK(records[1][0] == "a,b");
  CHECK(records[2][0] == "say \"hi\"");
  CHECK(records[3][0] == "two\r\nlines");
  CHECK(records[4][0] == "bad" + kFFFD + ",byte");
  for (const auto& record : records) CHECK(record.size() == stats_csv_columns().size());
}

TEST_CASE("stats csv: each graph's label from the run, the schema's version on every row") {
  StatsAccumulator acc;
  acc.add(report_of({region("a", 0, 1)}));  // graph 1
  StatsRun run;
  run.graph_labels = {{1, "train.py:42, \"decode\"\x1b"}, {7, "unused"}};
  std::ostringstream out;
  write_stats_csv(out, acc.stats(), run);
  const auto records = parse_csv(out.str());
  REQUIRE(records.size() == 2);
  const std::vector<std::string>& columns = stats_csv_columns();
  const auto column = [&](const char* name) {
    return static_cast<size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
  };
  CHECK(records[1][column("graph_label")] == "train.py:42, \"decode\"\x1b");
  CHECK(records[1][column("schema_version")] == std::to_string(stats_schema_version()));
  std::ostringstream plain;
  write_stats_csv(plain, acc.stats());  // no run: no label, the same version
  CHECK(parse_csv(plain.str())[1][column("graph_label")].empty());
}

TEST_CASE("stats json: the CSV's facts per region and the run's, every name escaped") {
  StatsAccumulator acc;
  acc.add(report_with_every_name());
  StatsRun run;
  run.graph_labels = {{1, "bad\xC3 label"}};
  run.replays = {GraphReplays{1, 40, 10, 4, true}};
  ReportSource source;
  source.backend = "host";
  source.device_name = "cpu\xC3";
  source.resolution_ns = 32;
  run.sources = {source};
  run.sample_every = 4;
  run.metadata = {{"torch_version", "2.11\n"}, {"bad\xFF", "x"}};
  std::ostringstream out;
  write_stats_json(out, acc.stats(), run);
  const nlohmann::json document = nlohmann::json::parse(out.str());
  CHECK(document["schema"] == "accgraph.stats");
  CHECK(document["schema_version"] == stats_schema_version());
  CHECK(document["run"]["sample_every"] == 4);
  CHECK(document["run"]["devices"][0]["device_name"] == "cpu" + kFFFD);
  CHECK(document["run"]["devices"][0]["timer_step_ns"] == 32);
  CHECK(document["run"]["metadata"]["torch_version"] == "2.11\n");
  CHECK(document["run"]["metadata"]["bad" + kFFFD] == "x");
  REQUIRE(document["graphs"].size() == 1);
  CHECK(document["graphs"][0]["label"] == "bad" + kFFFD + " label");
  CHECK(document["graphs"][0]["replays_timed"] == 10);
  const std::vector<RegionStats> stats = acc.stats();
  REQUIRE(document["regions"].size() == stats.size());
  for (size_t i = 0; i < stats.size(); ++i) {
    const nlohmann::json& region = document["regions"][i];
    CHECK(region["path"] == name_cases()[i].expected);
    CHECK(region["p50_ns"] == stats[i].p50_ns);
    CHECK(region["first_call"] == false);
    // Every numeric column of the CSV is a field of each region (the label is the graph's).
    for (const std::string& column : stats_csv_columns())
      if (column != "graph_label" && column != "schema_version")
        CHECK_MESSAGE(region.contains(column), column);
  }
}

TEST_CASE("table_text: a name as the statistics table shows it") {
  CHECK(table_text("esc\x1b[2J\x07 c1\xC2\x85 bad\xC3") ==
        "esc\\x1b[2J\\x07 c1\\u0085 bad" + kFFFD);
  CHECK(table_text("caf\xC3\xA9/h.0") == "caf\xC3\xA9/h.0");
}

TEST_CASE("stats table: one line per region, control characters shown as escapes") {
  StatsAccumulator acc;
  acc.add(report_of({region("line\nbreak", 0, 1000), region("esc\x1b[2J\x7f", 0, 1000),
                     region("c1\xC2\x85", 0, 1000), region("bad\xC3", 0, 1000),
                     region("caf\xC3\xA9", 0, 1000)}));
  std::ostringstream out;
  write_stats_table(out, acc.stats());
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 6);
  CHECK(lines[1].rfind("line\\x0abreak ", 0) == 0);
  CHECK(lines[2].rfind("esc\\x1b[2J\\x7f ", 0) == 0);
  CHECK(lines[3].rfind("c1\\u0085 ", 0) == 0);
  CHECK(lines[4].rfind("bad" + kFFFD + " ", 0) == 0);
  CHECK(lines[5].rfind("caf\xC3\xA9 ", 0) == 0);
  CHECK(out.str().find('\x1b') == std::string::npos);
  // Aligned by code points: the count column ends at the same code point on every line.
  const auto code_points = [](const std::string& s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
  };
  for (const std::string& line : lines) CHECK(code_points(line) == code_points(lines[0]));
}

TEST_CASE("exporters: a stream that refuses the bytes is an InvalidArgument error") {
  // Audit 4.9: a full disk used to go unnoticed.
  const ReplayReport r = report_of({region("a", 0, 1)});
  for (const NamedExporter& exporter : exporters()) {
    CAPTURE(exporter.what);
    RefusingBuffer refusing;
    std::ostream out(&refusing);
    CHECK_ACCGRAPH_ERROR(exporter.write(out, r), ErrorCode::InvalidArgument,
                         std::string("writing ") + exporter.what +
                             " failed: the output stream "
                             "reported an error (badbit)");

    // With exceptions enabled the stream throws std::ios_base::failure; still an Error.
    std::ostream throwing(&refusing);
    throwing.exceptions(std::ios::badbit | std::ios::failbit);
    CHECK_ACCGRAPH_ERROR(exporter.write(throwing, r), ErrorCode::InvalidArgument,
                         std::string("writing ") + exporter.what + " failed");

    // A stream that failed before the call.
    std::ostringstream failed;
    failed.setstate(std::ios::failbit);
    CHECK_ACCGRAPH_ERROR(exporter.write(failed, r), ErrorCode::InvalidArgument,
                         "the stream had failed before the call");
  }
}

TEST_CASE("exporters: a failing flush is an InvalidArgument error") {
  const ReplayReport r = report_of({region("a", 0, 1)});
  for (const NamedExporter& exporter : exporters()) {
    CAPTURE(exporter.what);
    FailingSyncBuffer buffer;
    std::ostream out(&buffer);
    CHECK_ACCGRAPH_ERROR(exporter.write(out, r), ErrorCode::InvalidArgument,
                         std::string("writing ") + exporter.what + " failed");
    CHECK(!buffer.taken.empty());
  }
}

// Audit 5.2: an unmeasurable region (RegionTiming::measurable false) has no times to export.
TEST_CASE("exporters: an unmeasurable region is left out of the trace and has empty CSV times") {
  RegionSample outer;
  outer.info.name = "outer";
  outer.start_ns = 1000;
  outer.end_ns = 5000;
  RegionSample lost;
  lost.info.name = "lost";
  lost.info.depth = 1;
  lost.info.parent = 0;
  lost.measurable = false;
  RegionSample inner;
  inner.info.name = "inner";
  inner.info.depth = 2;
  inner.info.parent = 1;
  inner.start_ns = 2000;
  inner.end_ns = 3000;
  ReportSource source;
  source.backend = "host";
  const ReplayReport report = ReplayReport::from_samples(source, 1, 0, {outer, lost, inner});

  std::ostringstream trace;
  write_chrome_trace(trace, {report});
  nlohmann::json document = nlohmann::json::parse(trace.str());
  std::vector<std::string> names;
  for (const auto& event : document["traceEvents"])
    if (event["ph"] == "X") names.push_back(event["name"]);
  CHECK(names == std::vector<std::string>{"outer", "inner"});
  for (const auto& event : document["traceEvents"])
    if (event["ph"] == "X" && event["name"] == "inner") CHECK(event["ts"] == 1.0);  // origin 1000

  std::ostringstream csv;
  write_reports_csv(csv, {report});
  CHECK(csv.str().find(",outer,0,0,,1000,5000,4000,,1000,5000,,\n") !=
        std::string::npos);  // lost child
  CHECK(csv.str().find(",outer/lost,1,0,,,,,,,,,\n") != std::string::npos);
  CHECK(csv.str().find(",outer/lost/inner,2,0,,2000,3000,1000,1000,2000,3000,,\n") !=
        std::string::npos);
}

namespace {

// A fixed set of reports for the Chrome trace's golden test: two devices (the first report on
// device 1, so the process ids differ from the (backend, device) order), nesting, a region ended
// on another stream, overlapping replays of two graphs on one stream, an eager report,
// metadata with escapes, duplicate keys and keys named like the writer's own args, invalid
// UTF-8, an unmeasurable region, zero-length regions, durations that are not end - start, and
// times far from the origin.
std::vector<ReplayReport> golden_trace_reports() {
  const auto at = [](std::string name, uint64_t stream, uint64_t start, uint64_t end, int depth,
                     int parent, Metadata metadata = {}) {
    RegionSample r;
    r.info.path = name;  // given, not made from the parent's: the writer must not care
    r.info.name = std::move(name);
    r.info.depth = depth;
    r.info.parent = parent;
    r.info.stream_id = stream;
    r.info.metadata = std::move(metadata);
    r.start_ns = start;
    r.end_ns = end;
    return r;
  };
  const auto source = [](std::string backend, int device, std::string device_name) {
    ReportSource s;
    s.backend = std::move(backend);
    s.device = device;
    s.device_name = std::move(device_name);
    return s;
  };
  const uint64_t t0 = 1'000'000'007;
  std::vector<ReplayReport> reports;

  // graph 1 on device 1: nesting, a region that ends on another stream
  reports.push_back(ReplayReport::from_samples(
      source("host", 1, "second \"cpu\"\xC3"), 1, 0,
      {at("step", 1, t0, t0 + 9000, 0, -1, {{"batch", "7"}}),
       at("forward", 1, t0 + 100, t0 + 4000, 1, 0),
       at("crossing", 1, t0 + 3500, t0 + 6000, 1, 0),  // overlaps forward
       at("copy", 2, t0 + 3600, t0 + 5000, 2, 2),      // its child on stream 2
       at("tail", 1, t0 + 9000, t0 + 9000, 1, 0)}));   // zero length, at the end

  for (uint64_t replay = 0; replay < 2; ++replay) {  // graphs 2 and 3 overlap on stream 5
    for (uint64_t graph = 2; graph <= 3; ++graph) {
      const uint64_t start = t0 + 20'000 + replay * 1000 + (graph - 2) * 300;
      reports.push_back(ReplayReport::from_samples(
          source("host", 0, "cpu"), graph, replay,
          {at("graph" + std::to_string(graph), 5, start, start + 700, 0, -1),
           at("inner", 5, start + 100, start + 333, 1, 0, {{"replay", std::to_string(replay)}})}));
    }
  }

  // eager regions, odd metadata, an unmeasurable region, far times
  RegionSample lost = at("lost\xFF", 5, 0, 0, 0, -1);
  lost.measurable = false;
  RegionSample odd = at("odd", 7, t0 + 123'456'789'012'345, t0 + 123'456'789'012'346, 0, -1);
  RegionSample backwards = at("backwards", 7, t0 + 60, t0 + 55, 0, -1);  // end before start: 0
  std::vector<RegionSample> eager = {
      at("say \"hi\"\\ \x01\t\n\x1f\x7f caf\xC3\xA9 \xF0\x9F\x98\x80 bad\xC3", 7, t0 + 50, t0 + 51,
         0, -1,
         {{"quote\"", "back\\slash"},
          {"ctrl", "\x01\x02\x1b[31m\r\n"},
          {"dup", "first"},
          {"dup", "second"},
          {"bad\xC3", "one"},
          {"bad\xFF", "two"},  // the same key once made valid UTF-8: the last one wins
          {"path", "overridden by the region's path"},
          {"graph_id", "overridden"},
          {"self_us", "overridden by the region's self time"},
          {"self_ns", "dropped: the Perfetto writer's own"},
          {"", "empty key"}}),
      lost,
      at("inside lost", 5, t0 + 20'050, t0 + 20'060, 1, 1),  // parent unmeasurable
      odd,
      backwards,
      at("zero", 7, t0 + 123'456'789'012'346, t0 + 123'456'789'012'346, 0, -1)};
  reports.push_back(ReplayReport::from_samples(source("host", 0, "cpu"), 0, UINT64_MAX, eager));

  // a second backend, then a report without regions
  reports.push_back(ReplayReport::from_samples(source("level_zero", 0, ""), 9, 0,
                                               {at("ze", 0, t0 + 10, t0 + 20, 0, -1)}));
  reports.push_back(ReplayReport());
  return reports;
}

}  // namespace

// What write_chrome_trace wrote for golden_trace_reports() when it built one nlohmann::json
// document (commit 4b21339), parsed and written again one event a line (ASCII, keys sorted);
// since the zero-copy reports, X events also carry "stream" in args, durations are end - start
// (the "odd" region's given UINT64_MAX duration is gone) and "backwards" ends before it starts;
// since issue 20, X events carry "self_us" (RegionTiming::self_ns, e.g. step: 9 us minus the
// union of forward and crossing, 5.9 us).
const char* const kGoldenTrace = R"json({"traceEvents":[
{"args":{"name":"host device 0 (cpu)"},"name":"process_name","ph":"M","pid":2,"tid":0},
{"args":{"labels":"timer step 0 ns, marker transition 0 ns, back to back 0 ns"},"name":"process_labels","ph":"M","pid":2,"tid":0},
{"args":{"name":"host device 1 (second \"cpu\"\ufffd)"},"name":"process_name","ph":"M","pid":1,"tid":0},
{"args":{"labels":"timer step 0 ns, marker transition 0 ns, back to back 0 ns"},"name":"process_labels","ph":"M","pid":1,"tid":0},
{"args":{"name":"level_zero device 0"},"name":"process_name","ph":"M","pid":3,"tid":0},
{"args":{"labels":"timer step 0 ns, marker transition 0 ns, back to back 0 ns"},"name":"process_labels","ph":"M","pid":3,"tid":0},
{"args":{"name":"stream 1"},"name":"thread_name","ph":"M","pid":1,"tid":1},
{"args":{"sort_index":1},"name":"thread_sort_index","ph":"M","pid":1,"tid":1},
{"args":{"name":"stream 1 (overlap 1)"},"name":"thread_name","ph":"M","pid":1,"tid":2},
{"args":{"sort_index":2},"name":"thread_sort_index","ph":"M","pid":1,"tid":2},
{"args":{"batch":"7","graph_id":1,"path":"step","replay_index":0,"self_us":3.1,"stream":1},"cat":"graph 1","dur":9.0,"name":"step","ph":"X","pid":1,"tid":1,"ts":0.0},
{"args":{"graph_id":1,"path":"forward","replay_index":0,"self_us":3.9,"stream":1},"cat":"graph 1","dur":3.9,"name":"forward","ph":"X","pid":1,"tid":1,"ts":0.1},
{"args":{"graph_id":1,"path":"crossing","replay_index":0,"self_us":1.1,"stream":1},"cat":"graph 1","dur":2.5,"name":"crossing","ph":"X","pid":1,"tid":2,"ts":3.5},
{"args":{"graph_id":1,"path":"tail","replay_index":0,"self_us":0.0,"stream":1},"cat":"graph 1","dur":0.0,"name":"tail","ph":"X","pid":1,"tid":1,"ts":9.0},
{"args":{"name":"stream 2"},"name":"thread_name","ph":"M","pid":1,"tid":3},
{"args":{"sort_index":3},"name":"thread_sort_index","ph":"M","pid":1,"tid":3},
{"args":{"graph_id":1,"path":"copy","replay_index":0,"self_us":1.4,"stream":2},"cat":"graph 1","dur":1.4,"name":"copy","ph":"X","pid":1,"tid":3,"ts":3.6},
{"args":{"name":"stream 5"},"name":"thread_name","ph":"M","pid":2,"tid":4},
{"args":{"sort_index":4},"name":"thread_sort_index","ph":"M","pid":2,"tid":4},
{"args":{"name":"stream 5 (overlap 1)"},"name":"thread_name","ph":"M","pid":2,"tid":5},
{"args":{"sort_index":5},"name":"thread_sort_index","ph":"M","pid":2,"tid":5},
{"args":{"graph_id":2,"path":"graph2","replay_index":0,"self_us":0.467,"stream":5},"cat":"graph 2","dur":0.7,"name":"graph2","ph":"X","pid":2,"tid":4,"ts":20.0},
{"args":{"graph_id":0,"path":"inside lost","replay_index":18446744073709551615,"self_us":0.01,"stream":5},"cat":"eager","dur":0.01,"name":"inside lost","ph":"X","pid":2,"tid":4,"ts":20.05},
{"args":{"graph_id":2,"path":"inner","replay":"0","replay_index":0,"self_us":0.233,"stream":5},"cat":"graph 2","dur":0.233,"name":"inner","ph":"X","pid":2,"tid":4,"ts":20.1},
{"args":{"graph_id":3,"path":"graph3","replay_index":0,"self_us":0.467,"stream":5},"cat":"graph 3","dur":0.7,"name":"graph3","ph":"X","pid":2,"tid":5,"ts":20.3},
{"args":{"graph_id":3,"path":"inner","replay":"0","replay_index":0,"self_us":0.233,"stream":5},"cat":"graph 3","dur":0.233,"name":"inner","ph":"X","pid":2,"tid":5,"ts":20.4},
{"args":{"graph_id":2,"path":"graph2","replay_index":1,"self_us":0.467,"stream":5},"cat":"graph 2","dur":0.7,"name":"graph2","ph":"X","pid":2,"tid":4,"ts":21.0},
{"args":{"graph_id":2,"path":"inner","replay":"1","replay_index":1,"self_us":0.233,"stream":5},"cat":"graph 2","dur":0.233,"name":"inner","ph":"X","pid":2,"tid":4,"ts":21.1},
{"args":{"graph_id":3,"path":"graph3","replay_index":1,"self_us":0.467,"stream":5},"cat":"graph 3","dur":0.7,"name":"graph3","ph":"X","pid":2,"tid":5,"ts":21.3},
{"args":{"graph_id":3,"path":"inner","replay":"1","replay_index":1,"self_us":0.233,"stream":5},"cat":"graph 3","dur":0.233,"name":"inner","ph":"X","pid":2,"tid":5,"ts":21.4},
{"args":{"name":"stream 7"},"name":"thread_name","ph":"M","pid":2,"tid":6},
{"args":{"sort_index":6},"name":"thread_sort_index","ph":"M","pid":2,"tid":6},
{"args":{"":"empty key","bad\ufffd":"two","ctrl":"\u0001\u0002\u001b[31m\r\n","dup":"second","graph_id":0,"path":"say \"hi\"\\ \u0001\t\n\u001f\u007f caf\u00e9 \ud83d\ude00 bad\ufffd","quote\"":"back\\slash","replay_index":18446744073709551615,"self_us":0.001,"stream":7},"cat":"eager","dur":0.001,"name":"say \"hi\"\\ \u0001\t\n\u001f\u007f caf\u00e9 \ud83d\ude00 bad\ufffd","ph":"X","pid":2,"tid":6,"ts":0.05},
{"args":{"graph_id":0,"path":"backwards","replay_index":18446744073709551615,"self_us":0.0,"stream":7},"cat":"eager","dur":0.0,"name":"backwards","ph":"X","pid":2,"tid":6,"ts":0.06},
{"args":{"graph_id":0,"path":"odd","replay_index":18446744073709551615,"self_us":0.001,"stream":7},"cat":"eager","dur":0.001,"name":"odd","ph":"X","pid":2,"tid":6,"ts":123456789012.345},
{"args":{"graph_id":0,"path":"zero","replay_index":18446744073709551615,"self_us":0.0,"stream":7},"cat":"eager","dur":0.0,"name":"zero","ph":"X","pid":2,"tid":6,"ts":123456789012.346},
{"args":{"name":"stream 0"},"name":"thread_name","ph":"M","pid":3,"tid":7},
{"args":{"sort_index":7},"name":"thread_sort_index","ph":"M","pid":3,"tid":7},
{"args":{"graph_id":9,"path":"ze","replay_index":0,"self_us":0.01,"stream":0},"cat":"graph 9","dur":0.01,"name":"ze","ph":"X","pid":3,"tid":7,"ts":0.01}
],"displayTimeUnit":"ns"})json";

TEST_CASE("chrome trace: the same document as the writer before streaming (golden)") {
  std::ostringstream out;
  write_chrome_trace(out, golden_trace_reports());
  const nlohmann::json actual = nlohmann::json::parse(out.str());
  const nlohmann::json expected = nlohmann::json::parse(kGoldenTrace);
  REQUIRE(actual.at("traceEvents").size() == expected.at("traceEvents").size());
  for (size_t i = 0; i < expected.at("traceEvents").size(); ++i) {
    CAPTURE(i);
    CHECK(actual["traceEvents"][i].dump() == expected["traceEvents"][i].dump());
  }
  CHECK(actual == expected);
}

namespace {

// A stream buffer that records the size of every write it takes, and refuses every byte past
// `capacity` (like a disk that fills up).
struct RecordingBuffer : std::streambuf {
  explicit RecordingBuffer(size_t capacity = SIZE_MAX) : capacity(capacity) {}
  size_t capacity;
  size_t taken = 0;
  std::vector<size_t> writes;
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    return xsputn(nullptr, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    const size_t accepted = std::min(static_cast<size_t>(n), capacity - taken);
    taken += accepted;
    writes.push_back(static_cast<size_t>(n));
    return static_cast<std::streamsize>(accepted);
  }
};

// 20,000 regions, 200 replays of one graph, about 3 MB of trace.
std::vector<ReplayReport> many_regions() {
  std::vector<ReplayReport> reports;
  for (uint64_t replay = 0; replay < 200; ++replay) {
    std::vector<RegionSample> regions;
    for (uint64_t i = 0; i < 100; ++i)
      regions.push_back(region("region " + std::to_string(i), replay * 10'000 + i * 100,
                               replay * 10'000 + i * 100 + 50, {{"index", std::to_string(i)}}));
    reports.push_back(
        ReplayReport::from_samples({"host", 0, "cpu", "", 0}, 1, replay, std::move(regions)));
  }
  return reports;
}

}  // namespace

TEST_CASE("chrome trace: written to the stream piece by piece, not as one document") {
  // Code review 3.4: the trace was built whole in memory (one nlohmann::json document and its
  // text) before the first byte reached the stream.
  RecordingBuffer recording;
  std::ostream out(&recording);
  write_chrome_trace(out, many_regions());
  REQUIRE(recording.taken > 2'000'000);
  CHECK(recording.writes.size() > 10);
  CHECK(*std::max_element(recording.writes.begin(), recording.writes.end()) < recording.taken / 10);
}

TEST_CASE("chrome trace: a stream that fails part way is an InvalidArgument error") {
  RecordingBuffer filling(100'000);
  std::ostream out(&filling);
  CHECK_ACCGRAPH_ERROR(write_chrome_trace(out, many_regions()), ErrorCode::InvalidArgument,
                       "writing the Chrome trace failed: the output stream reported an error "
                       "(badbit)");
  CHECK(filling.taken == 100'000);
}

TEST_CASE("trace formats: the file name's suffix chooses, the catch-all is Chrome JSON") {
  CHECK(trace_format_for("run.pftrace") == TraceFormat::Perfetto);
  CHECK(trace_format_for("dir/run.perfetto-trace") == TraceFormat::Perfetto);
  CHECK(trace_format_for("run.speedscope.json") == TraceFormat::Speedscope);
  CHECK(trace_format_for("dir/run.json") == TraceFormat::ChromeJson);
  CHECK(trace_format_for("run.pftrace.json") == TraceFormat::ChromeJson);
  CHECK(trace_format_for("pftrace") == TraceFormat::ChromeJson);
  CHECK(trace_format_for("/dev/full") == TraceFormat::ChromeJson);
  CHECK(is_perfetto_trace_path("run.perfetto-trace"));
  CHECK_FALSE(is_perfetto_trace_path("run.json"));
  CHECK(std::string(to_string(TraceFormat::Speedscope)) == "speedscope");
  CHECK(std::string(to_string(TraceFormat::ChromeJson)) == "chrome");
}

TEST_CASE("write_trace_file: Perfetto without accgraph::perfetto is Unsupported, saying how") {
  // This test does not link accgraph::perfetto, so nothing registered its writer.
  CHECK_FALSE(trace_format_supported(TraceFormat::Perfetto));
  CHECK(trace_format_supported(TraceFormat::ChromeJson));
  const std::vector<ReplayReport> reports = {report_of({region("a", 0, 10)})};
  CHECK_ACCGRAPH_ERROR(write_trace_file("never-written.pftrace", reports), ErrorCode::Unsupported,
                       "libprotobuf-dev");
  CHECK_ACCGRAPH_ERROR(check_trace_file("never-written.perfetto-trace"), ErrorCode::Unsupported,
                       "link");
  PerfettoOptions rank;
  rank.rank = 0;
  rank.world_size = 1;
  CHECK_ACCGRAPH_ERROR(write_trace_file("never-written.json", reports, rank),
                       ErrorCode::InvalidArgument, "*.pftrace");
  CHECK_ACCGRAPH_ERROR(write_trace_file("never-written.speedscope.json", reports, rank),
                       ErrorCode::InvalidArgument, "the speedscope profile");
  CHECK_FALSE(std::ifstream("never-written.json").good());
}

TEST_CASE("speedscope: one evented profile per track stack, regions as nested open/close") {
  // "outer" holds "inner"; "late" follows after a gap; "cross" overlaps "outer" without nesting,
  // so it goes to an overlap stack (its own profile).
  std::vector<RegionSample> regions = {region("outer", 100, 200), region("inner", 120, 150),
                                       region("late", 300, 340), region("cross", 180, 260)};
  regions[1].info.path = "outer/inner";
  regions[1].info.depth = 1;
  std::ostringstream out;
  write_speedscope(out, {report_of(regions)});
  const nlohmann::json doc = nlohmann::json::parse(out.str());
  CHECK(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  const auto& frames = doc["shared"]["frames"];
  REQUIRE(doc["profiles"].size() == 2);
  std::vector<std::string> shown;
  for (const auto& profile : doc["profiles"]) {
    CHECK(profile["type"] == "evented");
    CHECK(profile["unit"] == "nanoseconds");
    std::vector<std::string> open;  // the events must nest
    uint64_t last = 0;
    for (const auto& e : profile["events"]) {
      const std::string file = frames.at(e["frame"].get<size_t>())["file"];
      const uint64_t at = e["at"];
      CHECK(at >= last);
      last = at;
      if (e["type"] == "O") {
        open.push_back(file);
        shown.push_back(file + "@" + std::to_string(at));
      } else {
        REQUIRE_FALSE(open.empty());
        CHECK(open.back() == file);
        open.pop_back();
      }
    }
    CHECK(open.empty());
    CHECK(profile["endValue"].get<uint64_t>() == last);
  }
  std::sort(shown.begin(), shown.end());
  // Times are relative to the earliest start (100 ns).
  CHECK(shown == std::vector<std::string>{"cross@80", "late@200", "outer/inner@20", "outer@0"});
  CHECK(doc["profiles"][0]["name"] == "host device 0 (cpu" + kFFFD + "): stream 1");
  CHECK(doc["profiles"][1]["name"] == "host device 0 (cpu" + kFFFD + "): stream 1 (overlap 1)");
  for (const auto& f : frames) CHECK(f["name"] != "outer/inner");  // the name, not the path
}
