// OutputFile: a file the accgraph program writes (a trace, a CSV), checked before the work and
// written through timing::write_output_file (Note [Atomic output]) after it.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "accgraph/output_file.hpp"
#include "accgraph/trace_file.hpp"
#include "cli.hpp"

namespace accgraph::cli {

// A FileError's message with the option after the file's name: "'t.json' (--trace)".
inline std::string with_option(const timing::FileError& e, const std::string& path,
                               const char* option) {
  std::string message = e.message();
  const std::string quoted = "'" + path + "'";
  if (const size_t at = message.find(quoted); at != std::string::npos)
    message.insert(at + quoted.size(), fmt::format(" ({})", option));
  return message;
}

// A file the program writes at the end. The constructor checks that it can be created, so a
// path that cannot be written fails at once with the system's reason, without touching an
// existing file; write() replaces it only once the content is complete and checked through the
// close, so a failed or interrupted run leaves the old file as it was. `what` names the content
// ("the Chrome trace") in the errors. `check` is what checks it: timing::check_output_file, or
// timing::check_trace_file for a trace (which also refuses a format this build cannot write).
class OutputFile {
 public:
  OutputFile(std::string path, const char* option, const char* what,
             void (*check)(const std::string&) = &timing::check_output_file)
      : path_(std::move(path)), option_(option), what_(what) {
    with_option_errors([&] { check(path_); });
  }

  /// Writes the file with `write`; an OutputError naming the file, the option and the system's
  /// reason on a failed system call.
  void write(const std::function<void(std::ostream&)>& write) {
    with_option_errors([&] { timing::write_output_file(path_, what_, write); });
  }

  /// Writes `reports` as a trace in the format the file's name asks for (timing::
  /// write_trace_file); errors as write().
  void write_trace(const std::vector<timing::ReplayReport>& reports) {
    with_option_errors([&] { timing::write_trace_file(path_, reports); });
  }

  const std::string& path() const { return path_; }

 private:
  template <class Call>
  void with_option_errors(Call&& call) {
    try {
      call();
    } catch (const timing::FileError& e) {
      throw OutputError(with_option(e, path_, option_));
    }
  }

  std::string path_;
  const char* option_;
  const char* what_;
};

}  // namespace accgraph::cli
