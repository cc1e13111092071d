// Tests of accgraph/output_file.hpp: write_output_file replaces a file only once the new content
// is complete (Note [Atomic output]), writes special files in place, follows symbolic links,
// and names the file and errno's text in its errors (the 2026-11-25 audit, #24 and #75).
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accgraph/exporters.hpp"
#include "accgraph/output_file.hpp"
#include "check_error.hpp"
#include "file_text.hpp"

using namespace accgraph::timing;
using accgraph::Error;
using accgraph::ErrorCode;
namespace fs = std::filesystem;

namespace {

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("accgraph_output_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // The names in the directory (a leftover temporary file shows here).
  std::vector<std::string> names() const {
    std::vector<std::string> result;
    for (const auto& entry : fs::directory_iterator(path))
      result.push_back(entry.path().filename().string());
    std::sort(result.begin(), result.end());
    return result;
  }
};

// The FileError `call` throws (REQUIREd).
template <class Call>
FileError file_error(Call&& call) {
  try {
    call();
  } catch (const FileError& e) {
    return e;
  }
  FAIL("expected a FileError");
  throw;
}

const std::string kOld = "the old content, which must survive a failed write\n";

}  // namespace

TEST_CASE("write_output_file: a write that throws leaves the existing file byte for byte") {
  TempDir dir;
  const std::string target = dir.file("t.json", kOld);
  CHECK_ACCGRAPH_ERROR(write_output_file(target, "the Chrome trace",
                                         [](std::ostream& out) {
                                           out << std::string(200'000, 'x');  // reaches the disk
                                           throw Error(ErrorCode::InvalidArgument,
                                                       "rank 5 with world_size 2: refused");
                                         }),
                       ErrorCode::InvalidArgument, "rank 5 with world_size 2: refused");
  CHECK(file_text(target) == kOld);
  CHECK(dir.names() == std::vector<std::string>{"t.json"});  // no temporary file left
}

TEST_CASE("write_output_file: a successful write replaces the file, keeping its mode") {
  TempDir dir;
  const std::string target = dir.file("t.csv", kOld);
  ::chmod(target.c_str(), 0640);
  write_output_file(target, "the statistics CSV", [](std::ostream& out) { out << "new\n"; });
  CHECK(file_text(target) == "new\n");
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(dir.names() == std::vector<std::string>{"t.csv"});
  // A new file is created too.
  write_output_file((dir.path / "new.csv").string(), "x", [](std::ostream& out) { out << "1"; });
  CHECK(file_text((dir.path / "new.csv").string()) == "1");
}

TEST_CASE("write_output_file: a write error names the file and errno, the old file survives") {
  TempDir dir;
  const std::string target = dir.file("big.json", kOld);
  // RLIMIT_FSIZE makes write(2) on the temporary file fail with EFBIG halfway through.
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  rlimit small = old_limit;
  small.rlim_cur = 100'000;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const FileError e = file_error([&] {
    write_output_file(target, "the Chrome trace", [](std::ostream& out) {
      write_chrome_trace(out, {});         // a small valid start
      out << std::string(1'000'000, ' ');  // then more than the limit
    });
  });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(e.code() == ErrorCode::InvalidArgument);
  CHECK(e.step() == FileError::Step::Write);
  CHECK(e.error_number() == EFBIG);
  CHECK(e.path() == target);
  CHECK(e.message() == "cannot write the Chrome trace to '" + target +
                           "': File too large: the file was left as it was; free space or "
                           "choose another file");
  CHECK(file_text(target) == kOld);
  CHECK(dir.names() == std::vector<std::string>{"big.json"});
}

TEST_CASE("write_output_file: a path that cannot be created is an Open error with errno") {
  TempDir dir;
  const std::string missing = (dir.path / "no-such-dir" / "t.json").string();
  const auto nothing = [](std::ostream&) { FAIL("must not be called"); };
  const FileError e = file_error([&] { write_output_file(missing, "x", nothing); });
  CHECK(e.step() == FileError::Step::Open);
  CHECK(e.error_number() == ENOENT);
  CHECK(e.message() == "cannot open '" + missing +
                           "' for writing: No such file or directory: check the path, that its "
                           "directory exists and that you may write there");
  CHECK(file_error([&] { check_output_file(missing); }).error_number() == ENOENT);
  CHECK(file_error([&] { check_output_file(dir.path.string()); }).error_number() == EISDIR);
  CHECK(file_error([&] { write_output_file(dir.path.string(), "x", nothing); }).error_number() ==
        EISDIR);
  // check_output_file leaves nothing behind and an existing file as it was.
  const std::string existing = dir.file("keep.json", kOld);
  check_output_file(existing);
  CHECK(file_text(existing) == kOld);
  CHECK(dir.names() == std::vector<std::string>{"keep.json"});
  if (::geteuid() != 0) {  // root may write anything
    ::chmod(existing.c_str(), 0444);
    CHECK(file_error([&] { write_output_file(existing, "x", nothing); }).error_number() == EACCES);
    CHECK(file_text(existing) == kOld);
  }
}

TEST_CASE("write_output_file: /dev/full and a FIFO are written in place") {
  if (fs::exists("/dev/full")) {
    const FileError e = file_error([] {
      write_output_file("/dev/full", "the statistics CSV",
                        [](std::ostream& out) { out << std::string(100'000, 'x'); });
    });
    CHECK(e.error_number() == ENOSPC);
    CHECK(e.message().find("cannot write the statistics CSV to '/dev/full': No space left on "
                           "device: what reached it is incomplete") == 0);
  }
  TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string received;
  std::thread reader([&] { received = file_text(fifo); });
  write_output_file(fifo, "x", [](std::ostream& out) { out << "through the pipe"; });
  reader.join();
  CHECK(received == "through the pipe");
  CHECK(fs::is_fifo(fifo));
}

TEST_CASE("write_output_file: a symbolic link is followed, the link stays a link") {
  TempDir dir;
  const std::string real = dir.file("real.json", kOld);
  fs::create_symlink("real.json", dir.path / "link.json");  // relative, as ln -s makes it
  fs::create_symlink(dir.path / "link.json", dir.path / "link2.json");  // a chain
  write_output_file((dir.path / "link2.json").string(), "x",
                    [](std::ostream& out) { out << "new"; });
  CHECK(fs::is_symlink(dir.path / "link.json"));
  CHECK(fs::is_symlink(dir.path / "link2.json"));
  CHECK(file_text(real) == "new");
  // A dangling link creates its target.
  fs::create_symlink("later.json", dir.path / "dangling.json");
  write_output_file((dir.path / "dangling.json").string(), "x",
                    [](std::ostream& out) { out << "made"; });
  CHECK(fs::is_symlink(dir.path / "dangling.json"));
  CHECK(file_text((dir.path / "later.json").string()) == "made");
  // A loop is an error (ELOOP), never a hang.
  fs::create_symlink("loop_b", dir.path / "loop_a");
  fs::create_symlink("loop_a", dir.path / "loop_b");
  CHECK(file_error([&] {
          write_output_file((dir.path / "loop_a").string(), "x", [](std::ostream&) {});
        }).error_number() == ELOOP);
}
