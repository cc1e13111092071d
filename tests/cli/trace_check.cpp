// Checks that a file is a Chrome trace: a JSON object whose traceEvents hold complete ("X")
// events, each with name, ts, dur, pid and tid, and (optionally) exactly N of them.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: trace_check FILE [EXPECTED_X_EVENTS]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "trace_check: cannot open %s\n", argv[1]);
    return 1;
  }
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_check: %s is not valid JSON: %s\n", argv[1], e.what());
    return 1;
  }
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    std::fprintf(stderr, "trace_check: %s has no traceEvents array\n", argv[1]);
    return 1;
  }
  size_t complete = 0, index = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("ph", "") == "X") {
      for (const char* field : {"name", "ts", "dur", "pid", "tid"})
        if (!event.contains(field)) {
          std::fprintf(stderr, "trace_check: event %zu has no '%s'\n", index, field);
          return 1;
        }
      if (!event["ts"].is_number() || !event["dur"].is_number() || event["dur"].get<double>() < 0) {
        std::fprintf(stderr, "trace_check: event %zu has a bad ts or dur\n", index);
        return 1;
      }
      ++complete;
    }
    ++index;
  }
  std::printf("trace: %zu events, %zu complete (X) events with name/ts/dur/pid/tid\n", index,
              complete);
  if (argc == 3 && complete != std::strtoul(argv[2], nullptr, 10)) {
    std::fprintf(stderr, "trace_check: expected %s complete events\n", argv[2]);
    return 1;
  }
  return 0;
}
