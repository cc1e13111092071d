// Shared pieces of the accgraph program: usage errors and the subcommands' entry points.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace accgraph::cli {

/// A bad command line: main prints the message and the usage, and exits with code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& message, std::string usage_text)
      : std::runtime_error(message), usage(std::move(usage_text)) {}
  std::string usage;
};

int run_backends(const std::vector<std::string>& args);
int run_demo(const std::vector<std::string>& args);

/// Parses a whole non-negative number for option `option` (a UsageError otherwise).
long parse_count(const std::string& option, const std::string& text, long minimum,
                 const std::string& usage);

}  // namespace accgraph::cli
