// write_output_file: an output written to a temporary file and renamed over the target only once
// it is complete (Note [Atomic output] in accgraph/output_file.hpp).
#include "accgraph/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ostream>
#include <random>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace accgraph::timing {

FileError::FileError(Step step, std::string path, int error_number, std::string message)
    : Error(ErrorCode::InvalidArgument, std::move(message)),
      step_(step),
      path_(std::move(path)),
      error_number_(error_number) {}

FileError::~FileError() = default;

namespace {

// A stream buffer on a file descriptor that remembers the errno of the first failed write(2),
// so the error can name it (an ofstream only says "badbit").
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd), buffer_(64 * 1024) { reset(); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  void reset() { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  bool drain() {
    if (error_ != 0) return false;
    const char* data = pbase();
    size_t left = static_cast<size_t>(pptr() - pbase());
    while (left > 0) {
      const ssize_t n = ::write(fd_, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        return false;
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    reset();
    return true;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

// Where write_output_file puts the bytes.
struct Target {
  std::string file;     // the final target (symbolic links followed)
  bool direct = false;  // written in place: not a regular file (Note [Atomic output])
  bool exists = false;  // a regular file that is replaced
  mode_t mode = 0;      // its permission bits
};

[[noreturn]] void fail_open(const std::string& path, int error_number) {
  throw FileError(FileError::Step::Open, path, error_number,
                  fmt::format("cannot open '{}' for writing: {}: check the path, that its "
                              "directory exists and that you may write there",
                              path, std::strerror(error_number)));
}

bool under(const std::string& path, const char* prefix) {
  return path.compare(0, std::strlen(prefix), prefix) == 0;
}

// `path` with its symbolic links followed to the final target (which may not exist yet).
std::string follow_links(const std::string& path) {
  std::string file = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return file;
    std::vector<char> link(static_cast<size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    const ssize_t n = ::readlink(file.c_str(), link.data(), link.size());
    if (n < 0 || static_cast<size_t>(n) >= link.size()) fail_open(path, n < 0 ? errno : ELOOP);
    const std::string to(link.data(), static_cast<size_t>(n));
    const size_t slash = file.rfind('/');
    file = (!to.empty() && to.front() == '/') || slash == std::string::npos
               ? to
               : file.substr(0, slash + 1) + to;
  }
  fail_open(path, ELOOP);
}

Target resolve(const std::string& path) {
  if (path.empty()) fail_open(path, ENOENT);
  Target target;
  struct stat st {};
  if (under(path, "/dev/") || under(path, "/proc/") ||
      (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) {
    target.file = path;
    target.direct = true;
    return target;
  }
  target.file = follow_links(path);
  if (::stat(target.file.c_str(), &st) == 0) {
    // Replacing a file one may not write would be a surprise (mv's, not an exporter's).
    if (::access(target.file.c_str(), W_OK) != 0) fail_open(path, errno);
    target.exists = true;
    target.mode = st.st_mode & 07777;
  }
  return target;
}

// Creates "<file>.tmp.XXXXXX" (mode 0666 less the umask); its name goes to `temp`.
int create_temp(const std::string& path, const Target& target, std::string& temp) {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  static constexpr char kDigits[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t bits = counter.fetch_add(0x9E3779B97F4A7C15ull) ^ static_cast<uint64_t>(::getpid());
    std::string suffix;
    for (int i = 0; i < 6; ++i, bits /= 62) suffix += kDigits[bits % 62];
    temp = target.file + ".tmp." + suffix;
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (target.exists && ::fchmod(fd, target.mode) != 0) {
        const int error = errno;
        ::close(fd);
        ::unlink(temp.c_str());
        fail_open(path, error);
      }
      return fd;
    }
    if (errno != EEXIST) fail_open(path, errno);
  }
  fail_open(path, EEXIST);
}

// Whether the bytes go to the target itself or to a temporary file renamed over it.
enum class Placement { InPlace, Renamed };

[[noreturn]] void fail_write(const std::string& path, const std::string& what, int error_number,
                             Placement placement) {
  throw FileError(FileError::Step::Write, path, error_number,
                  fmt::format("cannot write {} to '{}': {}: {}; free space or choose another "
                              "file",
                              what, path, std::strerror(error_number),
                              placement == Placement::InPlace ? "what reached it is incomplete"
                                                              : "the file was left as it was"));
}

// Runs `write` on `fd` and closes it; FileError for a failed write or close, whatever `write`
// throws otherwise.
void write_and_close(int fd, const std::string& path, const std::string& what, Placement placement,
                     const std::function<void(std::ostream&)>& write) {
  FdStreamBuf buffer(fd);
  std::ostream out(&buffer);
  try {
    write(out);
    out.flush();
  } catch (...) {
    ::close(fd);
    if (buffer.error() != 0) fail_write(path, what, buffer.error(), placement);
    throw;
  }
  const int write_error = !out ? (buffer.error() != 0 ? buffer.error() : EIO) : 0;
  if (::close(fd) != 0 && write_error == 0) fail_write(path, what, errno, placement);
  if (write_error != 0) fail_write(path, what, write_error, placement);
}

}  // namespace

void write_output_file(const std::string& path, const std::string& what,
                       const std::function<void(std::ostream&)>& write) {
  const Target target = resolve(path);
  if (target.direct) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) fail_open(path, errno);
    write_and_close(fd, path, what, Placement::InPlace, write);
    return;
  }
  std::string temp;
  const int fd = create_temp(path, target, temp);
  try {
    write_and_close(fd, path, what, Placement::Renamed, write);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  if (::rename(temp.c_str(), target.file.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw FileError(FileError::Step::Replace, path, error,
                    fmt::format("cannot put {} in place as '{}' (renaming '{}' over it): {}: the "
                                "file was left as it was; check that you may replace it",
                                what, path, temp, std::strerror(error)));
  }
}

void check_output_file(const std::string& path) {
  const Target target = resolve(path);
  if (target.direct) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail_open(path, EISDIR);
    if (::access(path.c_str(), W_OK) != 0) fail_open(path, errno);
    return;
  }
  std::string temp;
  ::close(create_temp(path, target, temp));
  ::unlink(temp.c_str());
}

}  // namespace accgraph::timing
