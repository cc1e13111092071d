// The conformance harness: cases written once and run per backend, each checking one rule of the
// SPI contract (include/accgraph/spi/backend.hpp), capability-gated skips, and helpers shared by
// the case files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "check_error.hpp"

namespace accgraph::conformance {

using CaseFunction = void (*)();

/// One rule of the SPI contract, as backend.hpp names it ("fork-join.leave" in Note [Fork/join]).
struct Rule {
  const char* id;
  const char* note;          ///< the Note of backend.hpp the rule is written in
  const char* summary;       ///< the rule in one line
  const char* likely_cause;  ///< what a backend that fails it most likely does wrong
};

/// Every rule, in the order backend.hpp gives them (conformance_rules.cpp).
const std::vector<Rule>& rules();
/// The rule named `id`; throws std::logic_error for an unknown id (a typo in a case).
const Rule& rule(const std::string& id);

/// Adds a case to the list registered with doctest once per backend (in main). `rule` is the
/// rule the case checks (failures name it). Returns true so it can initialise a static.
bool add_case(const char* name, const char* rule, CaseFunction function, const char* file,
              unsigned line);

/// Checks made while a RuleScope lives are attributed to its rule instead of the case's own
/// (a case that checks a second rule on the way, e.g. a core refusal inside a fork/join case).
class RuleScope {
 public:
  explicit RuleScope(const char* rule);
  RuleScope(const RuleScope&) = delete;
  RuleScope& operator=(const RuleScope&) = delete;
  ~RuleScope();
};

/// The backend the running case is for.
const std::string& backend();
/// Its device 0 capabilities.
const Capabilities& capabilities();
/// The backend object itself, for the cases that exercise the SPI directly (markers).
Backend& backend_object();

/// Marks the running case skipped (counted in the summary, with `why`): call it and return
/// before any check. A case that skips has checked nothing.
void skip(const std::string& why);

/// A new stream of the backend under test (device 0).
inline Stream make_stream() { return Stream::create(backend()); }

/// The bytes of `buffer` (any kind), read through a Host buffer after synchronising `stream`.
std::vector<uint8_t> read_back(Stream& stream, const Buffer& buffer);

/// True when every byte of `bytes` equals `value` (the first mismatch is added to the failure).
bool all_equal(const std::vector<uint8_t>& bytes, uint8_t value);

/// Fills `buffer` with `value` and waits for it.
void fill_and_wait(Stream& stream, Buffer& buffer, uint8_t value);

/// Enqueues work lasting at least `duration`: delay() where the backend has it, else a host
/// call that sleeps. False when the backend has neither (the caller skips).
bool enqueue_known_duration(Stream& stream, std::chrono::nanoseconds duration);

/// One region of a delivered report, copied out of the timing layer's report types (so that
/// the cases depend on the report API in one place only). Its times are what the backend's
/// markers read (RegionTiming::raw_*), before the timing layer takes the marker overhead off:
/// the cases judge the backend.
struct TimedRegion {
  std::string path;
  int depth = 0;
  int parent = -1;
  uint64_t stream_id = 0;
  uint64_t start_ns = 0, end_ns = 0, duration_ns = 0;  // what the markers read
  bool measurable = true;
  timing::Metadata metadata;
  // As reported, marker costs taken off (Note [Marker transitions] in timing/model/report.cpp).
  uint64_t work_ns = 0, self_ns = 0;
  bool self_measurable = false;
};

/// One delivered report, copied.
struct TimedReplay {
  uint64_t graph_id = 0;
  uint64_t replay_index = 0;
  std::string backend;
  uint64_t resolution_ns = 0;
  std::vector<TimedRegion> regions;
};

/// Collects every report `profiler` delivers (a sink), in delivery order.
class ReportCollector {
 public:
  explicit ReportCollector(timing::Profiler& profiler);
  const std::vector<TimedReplay>& replays() const { return *replays_; }

 private:
  std::shared_ptr<std::vector<TimedReplay>> replays_;
};

}  // namespace accgraph::conformance

#define ACCGRAPH_CONFORMANCE_CAT2(a, b) a##b
#define ACCGRAPH_CONFORMANCE_CAT(a, b) ACCGRAPH_CONFORMANCE_CAT2(a, b)
#define ACCGRAPH_CONFORMANCE_CASE_IMPL(fn, name, rule)                           \
  static void fn();                                                              \
  [[maybe_unused]] static const bool ACCGRAPH_CONFORMANCE_CAT(fn, _registered) = \
      ::accgraph::conformance::add_case(name, rule, &fn, __FILE__, __LINE__);    \
  static void fn()

/// ACCGRAPH_CONFORMANCE_CASE("replay executes recorded work", "stream.capture") { ... }
#define ACCGRAPH_CONFORMANCE_CASE(name, rule) \
  ACCGRAPH_CONFORMANCE_CASE_IMPL(ACCGRAPH_CONFORMANCE_CAT(conformance_case_, __LINE__), name, rule)

/// Attributes the checks of the rest of the enclosing scope to `rule`.
#define ACCGRAPH_RULE(rule) \
  ::accgraph::conformance::RuleScope ACCGRAPH_CONFORMANCE_CAT(rule_scope_, __LINE__)(rule)
