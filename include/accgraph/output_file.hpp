// Output files that are either written completely or left as they were: every exporter front
// end (the CLI's --trace/--csv and merge-traces -o, Python's write_* and merge_traces) writes
// through write_output_file.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#include "accgraph/error.hpp"
#include "accgraph/export.hpp"

namespace accgraph::timing {

/// An Error (code InvalidArgument) of write_output_file or check_output_file that a system call
/// caused: which file, which step and errno. Python raises it as OSError.
class ACCGRAPH_API FileError : public Error {
 public:
  /// The step that failed: creating the file (or its temporary sibling), writing it, or putting
  /// it in place (close, rename).
  enum class Step { Open, Write, Replace };
  FileError(Step step, std::string path, int error_number, std::string message);
  ~FileError() override;
  Step step() const noexcept { return step_; }
  /// The file as the caller named it.
  const std::string& path() const noexcept { return path_; }
  /// errno of the failed call (strerror() says it in words).
  int error_number() const noexcept { return error_number_; }

 private:
  Step step_;
  std::string path_;
  int error_number_;
};

/// Note [Atomic output]: writes `path` so that it is either complete or untouched. `write` gets
/// a stream on a new temporary file "<target>.tmp.XXXXXX" in the target's directory; once it
/// returned, the stream was flushed and the file closed without error, the temporary file is
/// renamed over the target. When anything fails (`write` throws, e.g. because the options it
/// checks are inconsistent, the disk is full, the close fails) the temporary file is removed
/// and an existing target keeps its bytes; a process killed while writing may leave the
/// temporary file behind, never a truncated target.
///
/// - A symbolic link is followed to its final target, which is replaced (the link stays a link).
/// - An existing target that is not a regular file (/dev/full, /dev/stdout, a FIFO, a character
///   device), and any path under /dev/ or /proc/, cannot be replaced by a rename: it is opened
///   and written directly, as before, so a write error there reaches the caller as such.
/// - An existing regular file that the caller may not write (mode 0444) is refused with
///   EACCES, as opening it would be; a replaced file keeps its permission bits (not its owner).
///
/// `what` names the content in the errors ("the Chrome trace"). Throws FileError (naming `path`,
/// the step and errno's text) for a failed system call; whatever `write` throws otherwise
/// (accgraph::Error) passes through unchanged.
///
///   write_output_file("t.json", "the Chrome trace",
///                     [&](std::ostream& out) { write_chrome_trace(out, reports); });
ACCGRAPH_API void write_output_file(const std::string& path, const std::string& what,
                                    const std::function<void(std::ostream&)>& write);

/// Checks now, leaving the target as it is, that write_output_file(path, ...) could create its
/// file: a temporary file is created next to the target and removed again (for a target that is
/// written directly: that it exists and the caller may write it, access(W_OK), without opening
/// it, since opening a FIFO would block). FileError (Step::Open) otherwise. For a program that
/// would otherwise find out only after a long run.
ACCGRAPH_API void check_output_file(const std::string& path);

}  // namespace accgraph::timing
