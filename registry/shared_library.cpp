// Checks on a shared library before the dynamic loader sees it, and the escaping of names and
// paths for messages (declared in accgraph/spi/library_check.hpp, registry/shared_library.hpp
// and accgraph/spi/message_escape.hpp).
//
// Note [Library check]: glibc's dlopen reads the ELF header and the program headers with read(),
// then mmap()s every PT_LOAD segment from the file and touches it (relocations, zeroing the tail
// of the last page). A segment that ends past the end of the file is mapped anyway, and the first
// touch of a page beyond EOF raises SIGBUS: a truncated library (a copy cut short, a full disk)
// kills the process instead of failing dlopen. So before any dlopen the core
// (and the level_zero backend, for the driver paths the Level Zero loader will dlopen) checks
//   - the ELF magic, the class and data encoding of this process, the ELF version,
//   - the type ET_DYN and the machine of this process,
//   - e_phentsize == sizeof(Phdr) and the program-header table inside the file,
//   - every PT_LOAD segment's p_offset + p_filesz inside the file,
// and rejects the file with a reason naming what is wrong. These are the loader's own reads and
// mappings; a file that passes may still be refused by dlopen, which then fails cleanly. The
// check does not make a hostile library safe: a library runs code in the process anyway.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "accgraph/spi/library_check.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "utf8.hpp"
#include "shared_library.hpp"

namespace accgraph::plugin {

namespace {

using Header = ElfW(Ehdr);
using ProgramHeader = ElfW(Phdr);

constexpr unsigned char kProcessClass = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
constexpr unsigned char kProcessData =
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
constexpr const char* kRebuildAdvice =
    "build it as a shared library (add_library(... MODULE)) for this platform";
constexpr const char* kTruncatedAdvice = "rebuild or copy it again";

// The e_machine of the code running now, read from libaccgraph's own mapped ELF header (the first
// PT_LOAD of a shared library maps offset 0); EM_NONE when that fails, and the machine is then
// not checked.
uint16_t process_machine() {
  static const uint16_t machine = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&process_machine), &info) == 0 || info.dli_fbase == nullptr)
      return static_cast<uint16_t>(EM_NONE);
    Header self{};
    std::memcpy(&self, info.dli_fbase, sizeof(self));
    if (std::memcmp(self.e_ident, ELFMAG, SELFMAG) != 0) return static_cast<uint16_t>(EM_NONE);
    return static_cast<uint16_t>(self.e_machine);
  }();
  return machine;
}

std::string machine_name(unsigned machine) {
  switch (machine) {
    case EM_386:
      return "i386";
    case EM_ARM:
      return "ARM";
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "AArch64";
    case EM_PPC64:
      return "PowerPC64";
    case EM_S390:
      return "s390";
    case EM_RISCV:
      return "RISC-V";
    default:
      return fmt::format("ELF machine {}", machine);
  }
}

std::string truncated(std::string_view what, uint64_t offset, uint64_t bytes, uint64_t file_size) {
  if (offset > UINT64_MAX - bytes)
    return fmt::format(
        "it is truncated or corrupt: {} starts at byte {} and is {} bytes long, "
        "past the end of any file (the file has {}); {}",
        what, offset, bytes, file_size, kTruncatedAdvice);
  return fmt::format("it is truncated: {} needs bytes up to {} but the file has {}; {}", what,
                     offset + bytes, file_size, kTruncatedAdvice);
}

bool inside(uint64_t offset, uint64_t bytes, uint64_t file_size) {
  return offset <= file_size && bytes <= file_size - offset;
}

// The identification bytes of Note [Library check]: magic, class, data encoding and version of a
// file of `file_size` bytes whose first min(file_size, EI_NIDENT) bytes are in `header`.
std::optional<std::string> check_identification(uint64_t file_size, const Header& header) {
  if (file_size < SELFMAG || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return fmt::format(
        "it is not an ELF shared library (it does not start with the ELF magic "
        "bytes \\x7fELF; the file has {} bytes); {}",
        file_size, kRebuildAdvice);
  if (file_size < EI_NIDENT) return truncated("the ELF identification", 0, EI_NIDENT, file_size);
  if (header.e_ident[EI_CLASS] != kProcessClass)
    return fmt::format("it is an ELF file of class {} ({}) but this process is {}-bit; {}",
                       header.e_ident[EI_CLASS],
                       header.e_ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                       : header.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                                : "invalid",
                       sizeof(void*) * 8, kRebuildAdvice);
  if (header.e_ident[EI_DATA] != kProcessData)
    return fmt::format("its ELF data encoding is {} but this process is {}-endian; {}",
                       header.e_ident[EI_DATA] == ELFDATA2LSB   ? "little-endian"
                       : header.e_ident[EI_DATA] == ELFDATA2MSB ? "big-endian"
                                                                : "invalid",
                       kProcessData == ELFDATA2LSB ? "little" : "big", kRebuildAdvice);
  if (header.e_ident[EI_VERSION] != EV_CURRENT)
    return fmt::format("its ELF version is {}, not {} (EV_CURRENT); the file is corrupt; {}",
                       header.e_ident[EI_VERSION], EV_CURRENT, kTruncatedAdvice);
  return std::nullopt;
}

// The ELF header fields of Note [Library check]: type, machine and the program-header table's
// shape, checked against a file of `file_size` bytes.
std::optional<std::string> check_header_fields(uint64_t file_size, const Header& header) {
  if (header.e_type != ET_DYN)
    return fmt::format("it is {}, not a shared library (ET_DYN); {}",
                       header.e_type == ET_EXEC  ? "an executable (ET_EXEC)"
                       : header.e_type == ET_REL ? "an object file (ET_REL)"
                       : header.e_type == ET_CORE
                           ? "a core dump (ET_CORE)"
                           : fmt::format("an ELF file of type {}", header.e_type),
                       kRebuildAdvice);
  const uint16_t machine = process_machine();
  if (machine != EM_NONE && header.e_machine != machine)
    return fmt::format("it is built for {} but this process runs on {}; {}",
                       machine_name(header.e_machine), machine_name(machine), kRebuildAdvice);
  if (header.e_phentsize != sizeof(ProgramHeader))
    return fmt::format(
        "its program headers are {} bytes each, not the {} bytes of this ELF "
        "class; the file is corrupt; {}",
        header.e_phentsize, sizeof(ProgramHeader), kTruncatedAdvice);
  if (header.e_phnum == 0)
    return fmt::format("it has no program headers, so there is nothing to load; {}",
                       kRebuildAdvice);
  const uint64_t table_bytes = uint64_t{header.e_phnum} * sizeof(ProgramHeader);
  if (!inside(header.e_phoff, table_bytes, file_size))
    return truncated("its program-header table", header.e_phoff, table_bytes, file_size);
  return std::nullopt;
}

// The PT_LOAD segments of Note [Library check]: each lies inside the file of `file_size` bytes.
template <class Read>
std::optional<std::string> check_load_segments(uint64_t file_size, const Header& header,
                                               Read& read) {
  for (uint64_t i = 0; i < header.e_phnum; ++i) {
    ProgramHeader segment{};
    if (!read(header.e_phoff + i * sizeof(ProgramHeader), &segment, sizeof(segment)))
      return std::string("its program headers could not be read; check the file");
    if (segment.p_type != PT_LOAD) continue;
    if (!inside(segment.p_offset, segment.p_filesz, file_size))
      return truncated(fmt::format("segment {} (PT_LOAD)", i), segment.p_offset, segment.p_filesz,
                       file_size);
  }
  return std::nullopt;
}

// The checks of Note [Library check] on a file of `file_size` bytes; `read(offset, out, bytes)`
// copies bytes of the file and is called only for ranges inside it.
template <class Read>
std::optional<std::string> check_image(uint64_t file_size, Read read) {
  Header header{};
  const uint64_t ident_bytes = std::min<uint64_t>(file_size, EI_NIDENT);
  if (!read(0, &header, static_cast<size_t>(ident_bytes)))
    return std::string("its ELF header could not be read; check the file");
  if (auto problem = check_identification(file_size, header)) return problem;
  if (file_size < sizeof(Header)) return truncated("the ELF header", 0, sizeof(Header), file_size);
  if (!read(0, &header, sizeof(Header)))
    return std::string("its ELF header could not be read; check the file");
  if (auto problem = check_header_fields(file_size, header)) return problem;
  return check_load_segments(file_size, header, read);
}

// An open file descriptor, closed on every path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool read_fully(int fd, uint64_t offset, void* out, size_t bytes) {
  auto* cursor = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    ssize_t got = ::pread(fd, cursor, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    cursor += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

std::string cannot_open(const char* call, int error) {
  if (error == ENOENT)
    return fmt::format("the file does not exist ({}: {}); check the path", call,
                       std::strerror(error));
  return fmt::format("it cannot be opened ({}: {}); check the path and its permissions", call,
                     std::strerror(error));
}

std::string not_regular() {
  return "it is not a regular file; give the path of a shared library file";
}

}  // namespace

std::optional<std::string> shared_library_problem(const std::string& path) {
  // stat first: opening a FIFO or a device has effects a check must not have.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return cannot_open("stat", errno);
  if (!S_ISREG(info.st_mode)) return not_regular();
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return cannot_open("open", errno);
  if (::fstat(fd.get(), &info) != 0) return cannot_open("fstat", errno);
  if (!S_ISREG(info.st_mode)) return not_regular();
  return check_image(static_cast<uint64_t>(info.st_size),
                     [&](uint64_t offset, void* out, size_t bytes) {
                       return read_fully(fd.get(), offset, out, bytes);
                     });
}

std::optional<std::string> shared_library_image_problem(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  return check_image(size, [&](uint64_t offset, void* out, size_t count) {
    if (!inside(offset, count, size)) return false;
    if (count > 0) std::memcpy(out, bytes + offset, count);
    return true;
  });
}

std::string escape_for_message(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char byte) {
    static constexpr char kDigits[] = "0123456789abcdef";
    const char escaped[] = {'\\', 'x', kDigits[byte >> 4], kDigits[byte & 0xf]};
    out.append(escaped, sizeof(escaped));
  };
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t length = detail::utf8_sequence_length(text.substr(i)); length == 0) {
      hex(c);
      ++i;
    } else if (length == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      // U+0080..U+009F: the C1 controls (0x9b is a terminal's CSI).
      hex(c);
      hex(static_cast<unsigned char>(text[i + 1]));
      i += 2;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace accgraph::plugin
