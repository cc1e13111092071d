// write_trace_file: a trace written in the format its file name asks for, from the one list of
// trace formats (Note [Trace formats]).
#include <array>
#include <atomic>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "accgraph/exporters.hpp"
#include "accgraph/output_file.hpp"
#include "accgraph/trace_file.hpp"
#include "trace_writers.hpp"

namespace accgraph::timing {

namespace {

using detail::TraceWriter;

// Note [Trace formats]: every trace format is one row of kFormats, the only place that maps a
// file name to a format and a format to its writer; trace_format_for, write_trace_file (the
// CLI's --trace, Python's write_trace) and Python's annotate_trace all ask it. A new format is
// one file in timing/export/ (its write_<format>(std::ostream&, reports), declared in
// accgraph/exporters.hpp), one TraceFormat enumerator and one row here. A format whose writer
// needs a library of its own (Perfetto: libprotobuf) has no writer in its row: that library
// registers it when it is loaded (register_trace_writer, a static initializer), and the row's
// `missing` says how to get it. Rows are tried in order: a longer suffix before a shorter one
// that ends it (".speedscope.json" before the catch-all), the catch-all "" last.
struct FormatRow {
  std::string_view suffix;  // "" matches every name
  TraceFormat format;
  const char* name;  // to_string(format)
  const char* what;  // the content, in errors: "the Chrome trace"
  bool records_run;  // holds PerfettoOptions (rank, host, clocks); others refuse them
  TraceWriter writer;  // null: registered by the library that has it
  const char* missing;  // without a writer: how to get one
};

template <void (*Write)(std::ostream&, const std::vector<ReplayReport>&)>
void without_options(std::ostream& out, const std::vector<ReplayReport>& reports,
                     const PerfettoOptions&) {
  Write(out, reports);
}

constexpr const char* kPerfettoMissing =
    "native Perfetto traces are written by accgraph::perfetto, which this program does not have: "
    "accgraph was built without it (libprotobuf-dev and protobuf-compiler were missing when it "
    "was configured: install them (scripts/ensure-packages.sh) and configure and build again, "
    "or reinstall the Python package: pip install .) or the program does not link "
    "accgraph::perfetto; or write a Chrome trace (.json) instead, which ui.perfetto.dev opens "
    "too";

constexpr std::array<FormatRow, 4> kFormats{{
    {".pftrace", TraceFormat::Perfetto, "perfetto", "the Perfetto trace", true, nullptr,
     kPerfettoMissing},
    {".perfetto-trace", TraceFormat::Perfetto, "perfetto", "the Perfetto trace", true, nullptr,
     kPerfettoMissing},
    {".speedscope.json", TraceFormat::Speedscope, "speedscope", "the speedscope profile", false,
     &without_options<write_speedscope>, nullptr},
    {"", TraceFormat::ChromeJson, "chrome", "the Chrome trace", false,
     &without_options<write_chrome_trace>, nullptr},
}};

// The writers registered by other libraries, by TraceFormat (constant-initialized, so a
// library's static initializer may register before or after this one's).
std::array<std::atomic<TraceWriter>, kFormats.size()> registered{};

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         std::string_view(text).substr(text.size() - suffix.size()) == suffix;
}

const FormatRow& row_for(TraceFormat format) {
  for (const FormatRow& row : kFormats)
    if (row.format == format) return row;
  return kFormats.back();
}

const FormatRow& row_for(const std::string& path) {
  for (const FormatRow& row : kFormats)
    if (ends_with(path, row.suffix)) return row;
  return kFormats.back();
}

TraceWriter writer_of(const FormatRow& row) {
  const TraceWriter writer = registered[static_cast<size_t>(row.format)].load();
  return writer != nullptr ? writer : row.writer;
}

bool has_run_options(const PerfettoOptions& o) {
  return o.rank != -1 || o.world_size != 0 || !o.host.empty() ||
         o.host_clock != PerfettoOptions{}.host_clock || o.host_clock_uncertainty_ns != 0 ||
         !o.host_clock_offsets.empty() || !o.clocks.empty();
}

// The row's writer, or Unsupported saying how to get it.
TraceWriter require_writer(const FormatRow& row, const std::string& path) {
  const TraceWriter writer = writer_of(row);
  if (writer == nullptr)
    throw Error(ErrorCode::Unsupported, fmt::format("cannot write '{}': {}", path, row.missing));
  return writer;
}

}  // namespace

namespace detail {

void register_trace_writer(TraceFormat format, TraceWriter writer) noexcept {
  registered[static_cast<size_t>(format)].store(writer);
}

}  // namespace detail

TraceFormat trace_format_for(const std::string& path) { return row_for(path).format; }

const char* to_string(TraceFormat format) noexcept { return row_for(format).name; }

bool trace_format_supported(TraceFormat format) noexcept {
  return writer_of(row_for(format)) != nullptr;
}

void check_trace_file(const std::string& path) {
  require_writer(row_for(path), path);
  check_output_file(path);
}

void write_trace_file(const std::string& path, const std::vector<ReplayReport>& reports,
                      const PerfettoOptions& options) {
  const FormatRow& row = row_for(path);
  if (!row.records_run && has_run_options(options))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("write_trace_file('{}'): rank, world_size, host, host_clock, "
                            "host_clock_uncertainty_ns, clocks and host_clock_offsets are "
                            "recorded in native Perfetto traces only, and {} has nowhere to put "
                            "them: name the file *.pftrace, or leave them out",
                            path, row.what));
  const TraceWriter writer = require_writer(row, path);
  write_output_file(path, row.what,
                    [&](std::ostream& out) { writer(out, reports, options); });
}

}  // namespace accgraph::timing
