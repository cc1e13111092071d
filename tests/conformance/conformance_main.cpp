// accgraph-conformance: registers every conformance case once per backend with doctest, runs
// them, and prints a per-backend summary (passed, failed, skipped and why).
#define DOCTEST_CONFIG_IMPLEMENT
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "conformance.hpp"

namespace accgraph::conformance {

namespace {

struct Case {
  const char* name;
  CaseFunction function;
  const char* file;
  unsigned line;
};

std::vector<Case>& cases() {
  static std::vector<Case> list;
  return list;
}

struct BackendResult {
  Capabilities capabilities;
  int passed = 0;
  int failed = 0;
  std::vector<std::string> skips;  // "case: why"
};

std::map<std::string, BackendResult> results;
std::string current_backend;
std::string current_case;
// doctest keeps `const char*` names: the strings live here for the whole run (a deque never
// moves its elements).
std::deque<std::string> name_storage;

/// Tells the harness which backend the case doctest is about to run belongs to (its suite).
class BackendListener : public doctest::IReporter {
 public:
  explicit BackendListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    current_backend = data.m_test_suite;
    current_case = data.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    BackendResult& result = results[current_backend];
    (stats.testCaseSuccess ? result.passed : result.failed) += 1;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

void print_usage() {
  std::cout << "usage: accgraph-conformance [--backend NAME]... [--plugin PATH]... "
               "[doctest options]\n"
               "  --backend NAME  run the cases on this backend (repeatable; default: every "
               "available backend)\n"
               "  --plugin PATH   load a backend plugin library first (repeatable)\n"
               "exit code: 0 all passed, 1 a case failed, 2 bad arguments, 77 a requested "
               "backend is unavailable here\n"
               "  doctest options, e.g. --test-case='*replay*' --success; see --help below\n\n";
}

}  // namespace

bool add_case(const char* name, CaseFunction function, const char* file, unsigned line) {
  cases().push_back({name, function, file, line});
  return true;
}

const std::string& backend() { return current_backend; }

const Capabilities& capabilities() { return results.at(current_backend).capabilities; }

void skip(const std::string& why) {
  std::string line = fmt::format("skipped: {}: {}", current_backend, why);
  MESSAGE(line);
  results[current_backend].skips.push_back(fmt::format("{}: {}", current_case, why));
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
      MESSAGE(fmt::format("byte {} is {} where {} was expected", i, bytes[i], value));
      return false;
    }
  return true;
}

}  // namespace accgraph::conformance

DOCTEST_REGISTER_LISTENER("accgraph-backends", 1, accgraph::conformance::BackendListener);

int main(int argc, char** argv) {
  namespace cf = accgraph::conformance;
  std::vector<std::string> requested;
  std::vector<const char*> doctest_args{argv[0]};
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
      } else {
        if (arg == "--help" || arg == "-h" || arg == "-?") cf::print_usage();
        doctest_args.push_back(argv[i]);
      }
    }

    std::vector<accgraph::BackendStatus> statuses = accgraph::Registry::instance().status();
    if (requested.empty()) {
      for (const accgraph::BackendStatus& status : statuses)
        if (status.available) requested.push_back(status.name);
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
        std::cerr << fmt::format("accgraph-conformance: unknown backend '{}': registered "
                                 "backends are {} (load a plugin with --plugin PATH)\n",
                                 name, known);
        return 2;
      }
      if (!it->available) {
        // 77: ctest's conventional "skipped" (SKIP_RETURN_CODE), so a run registered for a
        // vendor backend reports a skip, not a failure, on a machine without that vendor.
        std::cout << fmt::format("accgraph-conformance: backend '{}' is unavailable here, "
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
  for (const std::string& name : requested) {
    cf::name_storage.push_back(name);
    const char* suite_name = cf::name_storage.back().c_str();
    for (const cf::Case& c : cf::cases()) {
      cf::name_storage.push_back(fmt::format("[{}] {}", name, c.name));
      doctest::detail::TestSuite suite;
      suite* suite_name;
      doctest::detail::regTest(
          doctest::detail::TestCase(c.function, c.file, c.line, suite) *
          cf::name_storage.back().c_str());
    }
  }

  doctest::Context context(static_cast<int>(doctest_args.size()), doctest_args.data());
  int code = context.run();
  if (context.shouldExit()) return code;

  std::cout << "\naccgraph conformance summary\n";
  for (const std::string& name : requested) {
    const cf::BackendResult& r = cf::results[name];
    std::cout << fmt::format("  {}: {} passed, {} failed, {} skipped\n", name, r.passed,
                             r.failed, r.skips.size());
    for (const std::string& why : r.skips) std::cout << "    skipped " << why << "\n";
  }
  return code;
}
