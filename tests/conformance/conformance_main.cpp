// accgraph-conformance: registers every conformance case once per backend with doctest, runs
// them, prints each failure with the SPI rule it checks and its likely cause, and a per-backend
// summary counted the way doctest counts (test cases and assertions).
#define DOCTEST_CONFIG_IMPLEMENT
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "conformance.hpp"

namespace accgraph::conformance {

namespace {

struct Case {
  const char* name;
  const char* rule;
  CaseFunction function;
};

std::vector<Case>& cases() {
  static std::vector<Case> list;
  return list;
}

struct Counts {
  int cases = 0, passed = 0, failed = 0, skipped = 0;
  int asserts = 0, asserts_failed = 0;
};

struct BackendResult {
  Capabilities capabilities;
  Counts counts;
  std::vector<std::string> skips;     // "case: why"
  std::vector<std::string> failures;  // "case (rule)"
};

std::map<std::string, BackendResult> results;
std::string current_backend;
std::string current_case;
const char* current_case_rule = nullptr;
bool current_skipped = false;
bool current_failed = false;
std::string current_skip_reason;
// The rule of each RuleScope alive on the case's thread (innermost last), and the rule that was
// in force when an exception left the case.
std::vector<const char*> rule_stack;
const char* rule_at_exception = nullptr;
std::mutex output_mutex;
// doctest keeps `const char*` names: the strings live here for the whole run (a deque never
// moves its elements).
std::deque<std::string> name_storage;
// Case name -> rule, for the reporter (doctest hands it the name only).
std::map<std::string, const char*> rule_of_case;

const char* active_rule() { return rule_stack.empty() ? current_case_rule : rule_stack.back(); }

std::string describe_rule(const char* id) {
  if (id == nullptr) return "rule: none recorded";
  const Rule& r = rule(id);
  return fmt::format("rule {} ({}, accgraph/spi/backend.hpp): {}\n  likely cause: {}", r.id, r.note,
                     r.summary, r.likely_cause);
}

std::string active_context() {
  std::ostringstream out;
  const int count = doctest::IReporter::get_num_active_contexts();
  const doctest::IContextScope* const* contexts = doctest::IReporter::get_active_contexts();
  for (int i = 0; i < count; ++i) {
    out << "\n  context: ";
    contexts[i]->stringify(&out);
  }
  return out.str();
}

/// Prints each failure with its rule and likely cause (no source locations: users have the
/// installed driver, not its sources), counts the cases per backend, and lists the cases for
/// --list-test-cases.
class ConformanceReporter : public doctest::IReporter {
 public:
  explicit ConformanceReporter(const doctest::ContextOptions& options) : options_(options) {}

  void report_query(const doctest::QueryData& query) override {
    if (options_.list_test_cases) {
      for (unsigned i = 0; i < query.num_data; ++i) {
        const doctest::TestCaseData* data = query.data[i];
        auto it = rule_of_case.find(data->m_name);
        std::cout << data->m_name
                  << (it != rule_of_case.end() ? fmt::format("   [rule {}]", it->second) : "")
                  << "\n";
      }
    } else if (options_.list_test_suites) {
      for (unsigned i = 0; i < query.num_data; ++i)
        std::cout << query.data[i]->m_test_suite << "\n";
    }
  }
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    current_backend = data.m_test_suite;
    current_case = data.m_name;
    auto it = rule_of_case.find(current_case);
    current_case_rule = it == rule_of_case.end() ? nullptr : it->second;
    current_skipped = false;
    current_failed = false;
    current_skip_reason.clear();
    rule_stack.clear();
    rule_at_exception = nullptr;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    BackendResult& result = results[current_backend];
    Counts& c = result.counts;
    ++c.cases;
    c.asserts += stats.numAssertsCurrentTest;
    c.asserts_failed += stats.numAssertsFailedCurrentTest;
    if (!stats.testCaseSuccess || current_failed) {
      ++c.failed;
      result.failures.push_back(
          fmt::format("{} (rule {})", current_case, current_case_rule ? current_case_rule : "?"));
    } else if (current_skipped) {
      ++c.skipped;
      result.skips.push_back(fmt::format("{}: {}", current_case, current_skip_reason));
    } else {
      ++c.passed;
    }
    if (options_.success && !current_skipped && stats.testCaseSuccess)
      std::cout << fmt::format("passed  {}   [rule {}]\n", current_case,
                               current_case_rule ? current_case_rule : "?");
    std::cout.flush();
  }
  void test_case_exception(const doctest::TestCaseException& e) override {
    current_failed = true;
    const char* id = rule_at_exception != nullptr ? rule_at_exception : active_rule();
    std::lock_guard<std::mutex> lock(output_mutex);
    std::cout << fmt::format("\nFAILED  {}\n  {}\n  {}: {}{}\n", current_case, describe_rule(id),
                             e.is_crash ? "crashed" : "unexpected exception",
                             e.error_string.c_str(), active_context());
    std::cout.flush();
  }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& data) override {
    if (!data.m_failed) return;
    current_failed = true;
    std::string check = fmt::format("{}( {} )", doctest::assertString(data.m_at), data.m_expr);
    std::string detail;
    if (data.m_threw)
      detail = fmt::format("threw: {}", data.m_exception.c_str());
    else if (data.m_decomp.size() > 0 && std::string(data.m_decomp.c_str()) != data.m_expr)
      detail = fmt::format("values: {}", data.m_decomp.c_str());
    std::lock_guard<std::mutex> lock(output_mutex);
    std::cout << fmt::format("\nFAILED  {}\n  {}\n  check: {}{}{}\n", current_case,
                             describe_rule(active_rule()), check,
                             detail.empty() ? "" : "\n  " + detail, active_context());
    std::cout.flush();
  }
  void log_message(const doctest::MessageData& data) override {
    std::lock_guard<std::mutex> lock(output_mutex);
    std::cout << fmt::format("note    {}: {}\n", current_case, data.m_string.c_str());
  }
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  const doctest::ContextOptions& options_;
};

void print_usage() {
  std::cout << "usage: accgraph-conformance [--backend NAME]... [--plugin PATH]... "
               "[--list-rules] [doctest options]\n"
               "  --backend NAME  run the cases on this backend (repeatable; default: every "
               "available backend)\n"
               "  --plugin PATH   load a backend plugin library first (repeatable)\n"
               "  --list-rules    print every rule of the SPI contract with the cases that check "
               "it, and exit\n"
               "Each case checks one rule of include/accgraph/spi/backend.hpp (named like "
               "'fork-join.leave'); a failure prints the rule and its likely cause.\n"
               "exit code: 0 all passed, 1 a case failed, 2 bad arguments, 77 a requested "
               "backend is unavailable here\n"
               "  doctest options, e.g. --test-case='*replay*' --success; see --help below\n\n";
}

void print_rules() {
  for (const Rule& r : rules()) {
    std::cout << fmt::format("{}  ({})\n  {}\n", r.id, r.note, r.summary);
    for (const Case& c : cases())
      if (std::string(c.rule) == r.id) std::cout << "  case: " << c.name << "\n";
  }
}

std::string count_line(const Counts& c) {
  return fmt::format(
      "test cases: {} | {} passed | {} failed | {} skipped\n"
      "        assertions: {} | {} passed | {} failed",
      c.cases, c.passed, c.failed, c.skipped, c.asserts, c.asserts - c.asserts_failed,
      c.asserts_failed);
}

}  // namespace

bool add_case(const char* name, const char* rule_id, CaseFunction function, const char*, unsigned) {
  rule(rule_id);  // an unknown rule is a bug in the case: fail at start-up
  cases().push_back({name, rule_id, function});
  return true;
}

RuleScope::RuleScope(const char* rule_id) {
  rule(rule_id);
  rule_stack.push_back(rule_id);
}

RuleScope::~RuleScope() {
  if (std::uncaught_exceptions() > 0 && rule_at_exception == nullptr)
    rule_at_exception = rule_stack.back();
  rule_stack.pop_back();
}

const std::string& backend() { return current_backend; }

const Capabilities& capabilities() { return results.at(current_backend).capabilities; }

Backend& backend_object() { return Registry::instance().backend(current_backend); }

void skip(const std::string& why) {
  current_skipped = true;
  current_skip_reason = why;
}

std::vector<uint8_t> read_back(Stream& stream, const Buffer& buffer) {
  Buffer host = Buffer::allocate(stream, buffer.size(), MemoryKind::Host);
  stream.copy(host.data(), buffer.data(), buffer.size());
  stream.synchronize();
  const auto* bytes = host.as<const uint8_t>();
  return std::vector<uint8_t>(bytes, bytes + buffer.size());
}

bool all_equal(const std::vector<uint8_t>& bytes, uint8_t value) {
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] != value) {
      INFO(fmt::format("byte {} of {} is {} where {} was expected", i, bytes.size(), bytes[i],
                       value));
      CHECK(bytes[i] == value);
      return false;
    }
  return true;
}

void fill_and_wait(Stream& stream, Buffer& buffer, uint8_t value) {
  stream.fill(buffer, value);
  stream.synchronize();
}

bool enqueue_known_duration(Stream& stream, std::chrono::nanoseconds duration) {
  if (capabilities().timed_delay) {
    stream.delay(duration);
    return true;
  }
  if (capabilities().host_calls) {
    stream.host_call([duration] { std::this_thread::sleep_for(duration); });
    return true;
  }
  return false;
}

ReportCollector::ReportCollector(timing::Profiler& profiler)
    : replays_(std::make_shared<std::vector<TimedReplay>>()) {
  profiler.add_sink([replays = replays_](const timing::ReplayReport& report) {
    TimedReplay copy;
    copy.graph_id = report.graph_id();
    copy.replay_index = report.replay_index();
    copy.backend = report.backend();
    copy.resolution_ns = report.resolution_ns();
    for (timing::RegionTiming region : report.regions())
      copy.regions.push_back(TimedRegion{region.path(), region.depth(), region.parent(),
                                         region.stream_id(), region.raw_start_ns(),
                                         region.raw_end_ns(), region.raw_duration_ns(),
                                         region.measurable(), region.metadata(),
                                         region.duration_ns(), region.self_ns(),
                                         region.self_measurable()});
    replays->push_back(std::move(copy));
  });
}

}  // namespace accgraph::conformance

DOCTEST_REGISTER_REPORTER("accgraph", 0, accgraph::conformance::ConformanceReporter);

int main(int argc, char** argv) {
  namespace cf = accgraph::conformance;
  std::vector<std::string> requested;
  std::vector<const char*> doctest_args{argv[0]};
  bool reporter_chosen = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      auto value = [&](const char* option) -> std::string {
        std::string prefix = std::string(option) + "=";
        if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
        if (i + 1 >= argc) {
          std::cerr << "accgraph-conformance: " << option << " expects a value\n";
          std::exit(2);
        }
        return argv[++i];
      };
      if (arg == "--backend" || arg.rfind("--backend=", 0) == 0) {
        requested.push_back(value("--backend"));
      } else if (arg == "--plugin" || arg.rfind("--plugin=", 0) == 0) {
        accgraph::load_plugin(value("--plugin"));
      } else if (arg == "--list-rules") {
        cf::print_rules();
        return 0;
      } else {
        if (arg == "--help" || arg == "-h" || arg == "-?") cf::print_usage();
        if (arg.rfind("--reporters", 0) == 0 || arg.rfind("-r=", 0) == 0 ||
            arg.rfind("--dt-reporters", 0) == 0)
          reporter_chosen = true;
        doctest_args.push_back(argv[i]);
      }
    }

    std::vector<accgraph::BackendStatus> statuses = accgraph::Registry::instance().status();
    if (requested.empty()) {
      for (const accgraph::BackendStatus& status : statuses)
        if (status.available)
          requested.push_back(status.name);
        else
          std::cout << fmt::format("accgraph-conformance: not testing '{}': {}\n", status.name,
                                   status.unavailable_reason);
    }
    for (const std::string& name : requested) {
      auto it = std::find_if(statuses.begin(), statuses.end(),
                             [&](const accgraph::BackendStatus& s) { return s.name == name; });
      if (it == statuses.end()) {
        std::string known;
        for (const auto& s : statuses) known += (known.empty() ? "" : ", ") + s.name;
        std::cerr << fmt::format(
            "accgraph-conformance: unknown backend '{}': registered "
            "backends are {} (load a plugin with --plugin PATH)\n",
            name, known);
        return 2;
      }
      if (!it->available) {
        // 77: ctest's conventional "skipped" (SKIP_RETURN_CODE), so a run registered for a
        // vendor backend reports a skip, not a failure, on a machine without that vendor.
        std::cout << fmt::format(
            "accgraph-conformance: backend '{}' is unavailable here, "
            "skipping: {}\n",
            name, it->unavailable_reason);
        return 77;
      }
      cf::results[name].capabilities = it->capabilities;
    }
  } catch (const accgraph::Error& e) {
    std::cerr << "accgraph-conformance: " << e.what() << "\n";
    return 1;
  }

  // One doctest case per (backend, case): name "[backend] case", suite = backend, so
  // --test-suite=cuda or --test-case='*fork*' select as expected.
  // The "line" is the registration index, so doctest's default order (by file, then line) runs
  // the cases in the order they are written, backend after backend.
  int index = 0;
  for (const std::string& name : requested) {
    cf::name_storage.push_back(name);
    const char* suite_name = cf::name_storage.back().c_str();
    for (const cf::Case& c : cf::cases()) {
      cf::name_storage.push_back(fmt::format("[{}] {}", name, c.name));
      cf::rule_of_case[cf::name_storage.back()] = c.rule;
      doctest::detail::TestSuite suite;
      suite* suite_name;
      // No source location: failures name the rule, not a file users do not have.
      doctest::detail::regTest(
          doctest::detail::TestCase(c.function, "accgraph-conformance", ++index, suite) *
          cf::name_storage.back().c_str());
    }
  }

  if (!reporter_chosen) doctest_args.push_back("--reporters=accgraph");
  doctest::Context context(static_cast<int>(doctest_args.size()), doctest_args.data());
  int code = context.run();
  if (context.shouldExit()) return code;

  std::cout << "\naccgraph conformance summary\n";
  cf::Counts total;
  for (const std::string& name : requested) {
    const cf::BackendResult& r = cf::results[name];
    std::cout << fmt::format("  {}: {}\n", name, cf::count_line(r.counts));
    for (const std::string& why : r.skips) std::cout << "    skipped " << why << "\n";
    for (const std::string& failed : r.failures) std::cout << "    FAILED " << failed << "\n";
    total.cases += r.counts.cases;
    total.passed += r.counts.passed;
    total.failed += r.counts.failed;
    total.skipped += r.counts.skipped;
    total.asserts += r.counts.asserts;
    total.asserts_failed += r.counts.asserts_failed;
  }
  if (requested.size() > 1) std::cout << fmt::format("  all: {}\n", cf::count_line(total));
  return code;
}
