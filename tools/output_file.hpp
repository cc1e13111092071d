// OutputFile: a file the accgraph program writes (a trace, a CSV), opened before the work.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "cli.hpp"

namespace accgraph::cli {

// A file the program writes at the end, opened (created or truncated) before the run, so that a
// path that cannot be written fails at once with the system's reason (audit 4.8), and checked
// through the close, so that a write error is never lost (4.9). `what` names the content
// ("the Chrome trace") in the errors.
class OutputFile {
 public:
  OutputFile(std::string path, const char* option, const char* what)
      : path_(std::move(path)),
        option_(option),
        what_(what),
        file_(std::fopen(path_.c_str(), "wb")) {
    if (file_ == nullptr)
      throw OutputError(fmt::format("cannot open '{}' ({}) for writing: {}: check the path, that "
                                    "its directory exists and that you may write there",
                                    path_, option_, std::strerror(errno)));
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);  // an error path: the run failed before writing
  }

  /// Writes `bytes`, flushes and closes the file; an OutputError on any failure.
  void write_and_close(const std::string& bytes) {
    std::FILE* file = std::exchange(file_, nullptr);
    errno = 0;
    const bool written =
        std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size() && std::fflush(file) == 0;
    const int write_errno = errno;
    const bool closed = std::fclose(file) == 0;
    if (!written || !closed)
      throw OutputError(fmt::format("cannot write {} to '{}' ({}): {}: the file is incomplete; "
                                    "free space or choose another file",
                                    what_, path_, option_,
                                    std::strerror(!written ? write_errno : errno)));
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const char* option_;
  const char* what_;
  std::FILE* file_;
};

}  // namespace accgraph::cli
