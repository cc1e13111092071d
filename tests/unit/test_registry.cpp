// Tests of registry.hpp and the plugin loader: built-ins, unknown names, duplicates, and every
// way a plugin library is rejected (each with its exact code and message); the library check and
// the escaping of plugin.hpp.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "registry_internal.hpp"  // detail:: functions exported for tests
#include "shared_library.hpp" // shared_library_image_problem
#include "accgraph/accgraph.hpp"
#include "accgraph/spi/library_check.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.h"
#include "accgraph/spi/priority.hpp"
#include "check_error.hpp"

using accgraph::Error;
using accgraph::ErrorCode;
using accgraph::Registry;

using accgraph::testing::require_error;

TEST_CASE("the built-in list registers host, cuda and level_zero") {
  Registry& registry = Registry::instance();
  CHECK(registry.contains("host"));
  CHECK(registry.contains("cuda"));
  CHECK(registry.contains("level_zero"));
  CHECK(registry.backend("host").name() == "host");
  // host is always available and is the lowest priority, so it is listed last among built-ins.
  auto names = registry.names();
  REQUIRE(!names.empty());
  bool host_available = false;
  for (const auto& status : registry.status())
    if (status.name == "host") host_available = status.available && !status.devices.empty();
  CHECK(host_available);
}

TEST_CASE("an unknown backend name lists what is registered") {
  require_error([] { Registry::instance().backend("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'", "registered backends are:", "host (priority 0", "cuda",
                 "level_zero"});
  require_error([] { accgraph::AcceleratorGraph graph("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'"});
}

TEST_CASE("registering a name twice is an error, not an exit") {
  require_error(
      [] {
        Registry::instance().register_backend(
            "host", accgraph::priority::normal, [] { return std::unique_ptr<accgraph::Backend>(); },
            "a test");
      },
      ErrorCode::InvalidArgument, {"backend 'host' is already registered (built-in)", "a test"});
  require_error([] { Registry::instance().register_backend("x_empty_factory", 1, {}, "a test"); },
                ErrorCode::InvalidArgument, {"empty factory"});
}

TEST_CASE("a backend whose factory fails is listed unavailable with the reason") {
  Registry& registry = Registry::instance();
  registry.register_backend(
      "test_factory_fails", accgraph::priority::normal,
      []() -> std::unique_ptr<accgraph::Backend> {
        throw Error(ErrorCode::Unavailable, "no device: the test says so");
      },
      "a test");
  require_error([&] { registry.backend("test_factory_fails"); }, ErrorCode::Unavailable,
                {"backend 'test_factory_fails' is unavailable: no device: the test says so"});
  bool listed = false;
  for (const auto& status : registry.status())
    if (status.name == "test_factory_fails") {
      listed = true;
      CHECK_FALSE(status.available);
      CHECK(status.unavailable_reason == "no device: the test says so");
    }
  CHECK(listed);
}

TEST_CASE("a well-formed plugin that cannot run is registered as unavailable") {
  Registry& registry = Registry::instance();
  accgraph::load_plugin(UNAVAILABLE_PLUGIN);
  CHECK(registry.contains("test_unavailable"));
  require_error([&] { registry.backend("test_unavailable"); }, ErrorCode::Unavailable,
                {"no toy device is attached to this machine"});
  // A second load of the same file is a duplicate name.
  require_error([] { accgraph::load_plugin(UNAVAILABLE_PLUGIN); }, ErrorCode::PluginError,
                {UNAVAILABLE_PLUGIN, "backend 'test_unavailable', which is already registered"});
}

// Audit P08: a factory that returns an empty std::unique_ptr and no error.
TEST_CASE("a plugin whose factory returns no backend says so") {
  Registry& registry = Registry::instance();
  accgraph::load_plugin(NULL_FACTORY_PLUGIN);
  CHECK(registry.contains("test_null_factory"));
  require_error([&] { registry.backend("test_null_factory"); }, ErrorCode::Unavailable,
                {"its create_backend returned OK but no backend (a null pointer",
                 "the plugin must return a backend, or fail with a status and a message"});
}

TEST_CASE("malformed plugins are rejected with the file and the reason") {
  struct Case {
    const char* path;
    const char* reason;
  };
  const Case cases[] = {
      {BAD_ABI_MAJOR_PLUGIN, "built for plugin ABI 3.6 but this accgraph"},
      {BAD_ABI_MAJOR_PLUGIN, "the major versions must match"},
      {SMALL_TABLE_PLUGIN, "smaller than the"},
      {BAD_NAME_PLUGIN, "'Not A Name!' is not a valid name"},
      {DUPLICATE_PLUGIN, "registers backend 'host', which is already registered (built-in)"},
      {NO_ENTRY_PLUGIN, "it has no entry point 'accgraph_plugin_entry'"},
      {NOT_A_LIBRARY_PLUGIN,
       "it is not an ELF shared library (it does not start with the ELF "
       "magic bytes \\x7fELF; the file has 42 bytes)"},
      {PLUGIN_DIRECTORY "/does_not_exist.so", "the file does not exist"},
      {PLUGIN_DIRECTORY, "it is not a regular file"},
  };
  size_t failures_before = Registry::instance().plugin_failures().size();
  for (const Case& c : cases) {
    CAPTURE(c.path);
    require_error([&] { accgraph::load_plugin(c.path); }, ErrorCode::PluginError,
                  {std::string("plugin '") + c.path + "' was rejected", c.reason});
  }
  // Each rejection is remembered for `accgraph backends`, and the registry still works.
  CHECK(Registry::instance().plugin_failures().size() ==
        failures_before + sizeof(cases) / sizeof(cases[0]));
  CHECK_FALSE(Registry::instance().contains("test_table"));
  CHECK(Registry::instance().backend("host").name() == "host");
}

TEST_CASE("create_graph_impl builds a graph of the named backend") {
  auto impl = accgraph::create_graph_impl("host", accgraph::GraphArgs{});
  REQUIRE(impl != nullptr);
  require_error([] { accgraph::create_graph_impl("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'"});
}

namespace {

namespace fs = std::filesystem;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Whether the library at `path` is still mapped into this process (without loading it).
bool still_mapped(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);  // balances the reference RTLD_NOLOAD took
  return true;
}

// A fresh directory for files a test makes, removed at the end of the test.
class TempDirectory {
 public:
  explicit TempDirectory(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

size_t failures_recorded() { return Registry::instance().plugin_failures().size(); }

}  // namespace

TEST_CASE("Registry::instance() is one registry, initialised once") {
  CHECK(&Registry::instance() == &Registry::instance());
}

// Audit 3.3: glibc's dlopen dies of SIGBUS on these files, so they must never reach it.
TEST_CASE("a truncated plugin is rejected before the dynamic loader sees it") {
  struct Case {
    const char* file;
    const char* reason;
  };
  const Case cases[] = {
      {"/libtruncated_40.so",
       "it is truncated: the ELF header needs bytes up to 64 but the file "
       "has 40; rebuild or copy it again"},
      {"/libtruncated_100.so", "it is truncated: its program-header table needs bytes up to "},
      {"/libtruncated_1000.so", "PT_LOAD) needs bytes up to "},
      {"/libtruncated_4000.so", "PT_LOAD) needs bytes up to "},
      {"/libtruncated_10000.so", "PT_LOAD) needs bytes up to "},
  };
  const size_t before = failures_recorded();
  for (const Case& c : cases) {
    const std::string path = std::string(TRUNCATED_DIRECTORY) + c.file;
    CAPTURE(path);
    require_error([&] { accgraph::load_plugin(path); }, ErrorCode::PluginError,
                  {"plugin '" + path + "' was rejected: ", c.reason});
    // The file check and the in-memory check agree.
    std::vector<char> bytes = read_file(path);
    CHECK(accgraph::plugin::shared_library_problem(path) ==
          accgraph::plugin::shared_library_image_problem(bytes.data(), bytes.size()));
  }
  CHECK(failures_recorded() == before + std::size(cases));
  // The segment message names the sizes: "but the file has 4000".
  require_error([] { accgraph::load_plugin(TRUNCATED_DIRECTORY "/libtruncated_4000.so"); },
                ErrorCode::PluginError, {"but the file has 4000; rebuild or copy it again"});
  // The whole plugin passes.
  CHECK_FALSE(accgraph::plugin::shared_library_problem(UNAVAILABLE_PLUGIN).has_value());
  std::vector<char> whole = read_file(UNAVAILABLE_PLUGIN);
  CHECK_FALSE(accgraph::plugin::shared_library_image_problem(whole.data(), whole.size()));
}

TEST_CASE("the library check names what is wrong with an ELF header") {
  const std::vector<char> good = read_file(UNAVAILABLE_PLUGIN);
  REQUIRE(good.size() > sizeof(ElfW(Ehdr)));
  auto problem_with = [&](auto edit) {
    std::vector<char> bytes = good;
    ElfW(Ehdr) header;
    std::memcpy(&header, bytes.data(), sizeof(header));
    edit(header);
    std::memcpy(bytes.data(), &header, sizeof(header));
    return accgraph::plugin::shared_library_image_problem(bytes.data(), bytes.size())
        .value_or("(no problem found)");
  };
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_ident[EI_MAG1] = 'X';
        }).find("it is not an ELF shared library") != std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_ident[EI_CLASS] = ELFCLASS32;
        }).find("it is an ELF file of class 1 (32-bit) but this process is 64-bit") !=
        std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_ident[EI_DATA] = ELFDATA2MSB;
        }).find("its ELF data encoding is big-endian but this process is little-endian") !=
        std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_type = ET_EXEC;
        }).find("it is an executable (ET_EXEC), not a shared library (ET_DYN)") !=
        std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_machine = EM_S390;
        }).find("it is built for s390 but this process runs on") != std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_phentsize = 8;
        }).find("its program headers are 8 bytes each, not the 56 bytes") != std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) { h.e_phnum = 0; }).find("it has no program headers") !=
        std::string::npos);
  CHECK(problem_with([](ElfW(Ehdr) & h) {
          h.e_phoff = ~uint64_t{0} - 8;
        }).find("it is truncated or corrupt: its program-header table starts at byte") !=
        std::string::npos);
  CHECK(accgraph::plugin::shared_library_image_problem(nullptr, 0)
            .value_or("")
            .find("the file has 0 bytes") != std::string::npos);
}

// Audit 3.12 and 3.13: a std exception, a type defined in the plugin (its type information goes
// away with the library), a type not derived from std::exception, and an int.
TEST_CASE("an entry point that throws is a rejection, and the library is closed") {
  struct Case {
    const char* path;
    const char* what;
  };
  const Case cases[] = {
      {ENTRY_THROWS_STD_PLUGIN,
       "its entry point threw an exception of type std::runtime_error (entry point threw "
       "std::runtime_error); the entry point must return its table (or NULL) and never throw"},
      {ENTRY_THROWS_CUSTOM_PLUGIN,
       "::PluginOwnError (a plugin-defined error); the entry point must return"},
      {ENTRY_THROWS_PLAIN_PLUGIN, "::PlainThrowable; the entry point must return"},
      {ENTRY_THROWS_INT_PLUGIN, "its entry point threw an exception of type int; the entry point"},
  };
  const size_t before = failures_recorded();
  for (const Case& c : cases) {
    CAPTURE(c.path);
    require_error([&] { accgraph::load_plugin(c.path); }, ErrorCode::PluginError,
                  {std::string("plugin '") + c.path + "' was rejected: ", c.what});
    CHECK_FALSE(still_mapped(c.path));
    std::vector<accgraph::PluginFailure> failures = Registry::instance().plugin_failures();
    REQUIRE(!failures.empty());
    CHECK(failures.back().path == c.path);
    CHECK(failures.back().reason.find(c.what) != std::string::npos);
  }
  CHECK(failures_recorded() == before + std::size(cases));
  CHECK(Registry::instance().backend("host").name() == "host");
}

// Audit 3.15: through the plugin's C ABI, and through a factory registered by the application.
TEST_CASE("a factory that throws a non-standard exception makes its backend unavailable") {
  Registry& registry = Registry::instance();
  accgraph::load_plugin(FACTORY_THROWS_INT_PLUGIN);
  require_error([&] { registry.backend("test_factory_throws_int"); }, ErrorCode::Unavailable,
                {"backend 'test_factory_throws_int' is unavailable: its create_backend threw an "
                 "exception of type int through the C ABI; a plugin must return a status"});
  registry.register_backend(
      "test_factory_throws_int_app", accgraph::priority::normal,
      []() -> std::unique_ptr<accgraph::Backend> { throw 42; }, "a test");
  require_error([&] { registry.backend("test_factory_throws_int_app"); }, ErrorCode::Unavailable,
                {"its factory threw an exception that is not a std::exception"});
  bool listed = false;
  for (const auto& status : registry.status())
    if (status.name == "test_factory_throws_int") {
      listed = true;
      CHECK_FALSE(status.available);
    }
  CHECK(listed);
}

// Audit 3.17: the plugin fills all 2048 bytes and writes no NUL; nothing past them is read (an
// ASan build reports the over-read this used to do).
TEST_CASE("a create_backend message without a NUL is cut at the buffer's end") {
  accgraph::load_plugin(MESSAGE_NO_NUL_PLUGIN);
  std::string reason;
  for (const auto& status : Registry::instance().status())
    if (status.name == "test_message_no_nul") reason = status.unavailable_reason;
  const std::string head = "no_nul_message:";
  CHECK(reason.size() == 2048);
  CHECK(reason == head + std::string(2048 - head.size() - 1, 'x') + "Z");
}

// Audit 3.20: the duplicate is found by Registry::load_plugin after the library was opened.
TEST_CASE("a rejected library is unmapped, an accepted one stays") {
  accgraph::load_plugin(TWIN_PLUGIN);
  require_error([] { accgraph::load_plugin(TWIN_COPY_PLUGIN); }, ErrorCode::PluginError,
                {std::string("plugin '") + TWIN_COPY_PLUGIN + "' was rejected",
                 "backend 'test_twin', which is already registered"});
  CHECK(still_mapped(TWIN_PLUGIN));
  CHECK_FALSE(still_mapped(TWIN_COPY_PLUGIN));
  require_error([] { accgraph::load_plugin(BAD_NAME_PLUGIN); }, ErrorCode::PluginError,
                {"is not a valid name"});
  CHECK_FALSE(still_mapped(BAD_NAME_PLUGIN));
  // The same file again is the same mapping; rejecting it must not unmap the accepted one.
  require_error([] { accgraph::load_plugin(TWIN_PLUGIN); }, ErrorCode::PluginError,
                {"already registered"});
  CHECK(still_mapped(TWIN_PLUGIN));
  require_error([] { Registry::instance().backend("test_twin"); }, ErrorCode::Unavailable,
                {"the twin test plugin has no device"});
}

// Audit 3.22. The tests run as root, for whom a mode-000 directory opens anyway, so opendir is
// made to fail by a path that exists but is not a directory (a FIFO: ENOTDIR, without blocking).
TEST_CASE("a plugin path item that cannot be read as a directory is reported") {
  TempDirectory directory("accgraph_test_registry_fifo");
  const std::string fifo = (directory.path() / "plugins_fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::vector<accgraph::detail::PluginCandidate> candidates =
      accgraph::detail::plugin_candidates(std::string(UNAVAILABLE_PLUGIN) + "::" + fifo);
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0].path == UNAVAILABLE_PLUGIN);
  CHECK(candidates[0].problem.empty());
  CHECK(candidates[1].path == fifo);
  CHECK(candidates[1].problem ==
        "'" + fifo +
            "' on the plugin path is not a plugin library and cannot be read as a "
            "directory (opendir: Not a directory); fix its permissions or remove it from "
            "ACCGRAPH_PLUGIN_PATH");
  // Loading it as a file is a plain rejection (it is not a regular file), without blocking.
  require_error([&] { accgraph::load_plugin(fifo); }, ErrorCode::PluginError,
                {"it is not a regular file"});
}

// Audit 3.23.
TEST_CASE("a plugin that cannot be opened is rejected with the real reason") {
  require_error([] { accgraph::load_plugin(LOOP_DIRECTORY "/a.so"); }, ErrorCode::PluginError,
                {"it cannot be opened (stat: Too many levels of symbolic links)"});
  const std::string long_path = "/tmp/" + std::string(5000, 'a') + ".so";
  require_error([&] { accgraph::load_plugin(long_path); }, ErrorCode::PluginError,
                {"it cannot be opened (stat: File name too long)"});
  require_error([] { accgraph::load_plugin(PLUGIN_DIRECTORY "/does_not_exist.so"); },
                ErrorCode::PluginError,
                {"the file does not exist (stat: No such file or directory); check the path"});
  std::vector<accgraph::detail::PluginCandidate> candidates =
      accgraph::detail::plugin_candidates(LOOP_DIRECTORY);
  REQUIRE(candidates.size() == 2);
  CHECK(candidates[0].path == LOOP_DIRECTORY "/a.so");
  CHECK(candidates[1].path == LOOP_DIRECTORY "/b.so");
}

// Audit 3.8.
TEST_CASE("plugin names and paths are escaped in every message") {
  using accgraph::plugin::escape_for_message;
  CHECK(escape_for_message("plain/path_1.so") == "plain/path_1.so");
  CHECK(escape_for_message("a\nb") == "a\\nb");
  CHECK(escape_for_message("back\\slash") == "back\\\\slash");
  CHECK(escape_for_message(std::string("nul\0tab\tdel\x7f", 12)) == "nul\\x00tab\\x09del\\x7f");
  CHECK(escape_for_message("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");              // valid UTF-8 stays
  CHECK(escape_for_message("\xff\xc0\xaf") == "\\xff\\xc0\\xaf");  // invalid, overlong
  CHECK(escape_for_message("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(escape_for_message("\xc2\x9b[2J") == "\\xc2\\x9b[2J");     // C1 CSI
  CHECK(escape_for_message("cut \xe2\x82") == "cut \\xe2\\x82");   // sequence cut short

  // A backend name made to forge a line.
  require_error([] { accgraph::load_plugin(NAME_NEWLINE_PLUGIN); }, ErrorCode::PluginError,
                {"its backend name 'a\\nrejected plugin /fake: spoofed' is not a valid name"});
  try {
    accgraph::load_plugin(NAME_NEWLINE_PLUGIN);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
  // A path with a newline and a byte that is not UTF-8.
  TempDirectory directory("accgraph_test_registry_escape");
  const std::string path = (directory.path() / "lib\nrejected plugin \xff.so").string();
  fs::copy_file(NO_ENTRY_PLUGIN, path);
  const std::string shown = directory.path().string() + "/lib\\nrejected plugin \\xff.so";
  require_error([&] { accgraph::load_plugin(path); }, ErrorCode::PluginError,
                {"plugin '" + shown + "' was rejected: it has no entry point"});
  std::vector<accgraph::PluginFailure> failures = Registry::instance().plugin_failures();
  REQUIRE(!failures.empty());
  CHECK(failures.back().path == shown);
  CHECK(failures.back().reason.find('\n') == std::string::npos);
  // An unknown backend name from the caller is escaped too.
  require_error([] { Registry::instance().backend("no\nsuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'no\\nsuch'"});
}

// Audit 3.19.
TEST_CASE("a backend with no devices is never the default backend") {
  Registry& registry = Registry::instance();
  accgraph::load_plugin(ZERO_DEVICES_PLUGIN);
  REQUIRE(registry.names().front() == "test_zero_devices");  // priority 101: first in line
  CHECK(registry.backend("test_zero_devices").devices().empty());
  CHECK(registry.default_backend_name() != "test_zero_devices");
  for (const auto& status : registry.status())
    if (status.name == "test_zero_devices") {
      CHECK_FALSE(status.available);
      CHECK(status.unavailable_reason == "it has no devices");
    }
  ::setenv("ACCGRAPH_BACKEND", "test_zero_devices", 1);
  require_error([&] { registry.default_backend_name(); }, ErrorCode::Unavailable,
                {"ACCGRAPH_BACKEND names backend 'test_zero_devices', which cannot run work: it "
                 "has no devices; pick another backend"});
  ::unsetenv("ACCGRAPH_BACKEND");
}

// The table checks alone (what fuzz_plugin_table drives).
TEST_CASE("check_plugin_table accepts a good table and rejects each bad field") {
  using accgraph::detail::check_plugin_table;
  auto create = [](void**, char*, size_t) { return ACCGRAPH_STATUS_UNAVAILABLE; };
  auto destroy = [](void*) {};
  AccgraphPluginApi good = {sizeof(AccgraphPluginApi),
                            ACCGRAPH_PLUGIN_ABI_MAJOR,
                            ACCGRAPH_PLUGIN_ABI_MINOR,
                            "good_name",
                            1,
                            "1.0",
                            create,
                            destroy};
  check_plugin_table(&good, "/p.so");  // returns
  // Older minors of the same major still load: 2.0, 2.1 (before CaptureTail, ABI 2.2), 2.2
  // (before MarkerOptions::memory_budget, ABI 2.3), 2.3 (before MarkerKernelNames, ABI 2.4), 2.4
  // (before UntimedReplay, ABI 2.5) and 2.5 (before DlpackDevices, ABI 2.6: test_dlpack.cpp
  // checks the default such a plugin's memory gets); a newer minor is refused.
  static_assert(ACCGRAPH_PLUGIN_ABI_MINOR == 6u, "a new minor: add it to the list below");
  for (uint32_t minor : {0u, 1u, 2u, 3u, 4u, 5u}) {
    AccgraphPluginApi older = good;
    older.abi_minor = minor;
    check_plugin_table(&older, "/older.so");  // returns
  }
  AccgraphPluginApi newer = good;
  newer.abi_minor = ACCGRAPH_PLUGIN_ABI_MINOR + 1;
  require_error([&] { check_plugin_table(&newer, "/newer.so"); }, ErrorCode::PluginError,
                {"plugin '/newer.so' was rejected: it was built for plugin ABI 2.7 but this "
                 "accgraph (0.2.0) speaks ABI 2.6: it needs a newer accgraph; install one whose "
                 "plugin ABI is 2.7 or later, or rebuild the plugin against this one"});
  require_error([] { check_plugin_table(nullptr, "/p.so"); }, ErrorCode::PluginError,
                {"plugin '/p.so' was rejected: its entry point returned no table"});
  // A plugin built before TimestampMarkers::read filled the caller's buffer (ABI 1) implements
  // another vtable: refused by its major, never loaded.
  AccgraphPluginApi bad = good;
  bad.abi_major = 1;
  bad.abi_minor = 0;
  require_error([&] { check_plugin_table(&bad, "/old.so"); }, ErrorCode::PluginError,
                {"plugin '/old.so' was rejected: it was built for plugin ABI 1.0 but this "
                 "accgraph (0.2.0) speaks ABI 2.6 and the major versions must match; rebuild the "
                 "plugin against this accgraph"});
  bad = good;
  bad.create_backend = nullptr;
  require_error([&] { check_plugin_table(&bad, "/p.so"); }, ErrorCode::PluginError,
                {"its table lacks create_backend or destroy_backend"});
  // A long invalid name is cut in the message; a long valid one is accepted (audit 3.9).
  std::string long_name(100000, 'a');
  bad = good;
  bad.backend_name = long_name.c_str();
  check_plugin_table(&bad, "/p.so");
  long_name.back() = '!';
  require_error([&] { check_plugin_table(&bad, "/p.so"); }, ErrorCode::PluginError,
                {"its backend name '" + std::string(200, 'a') +
                 "... (100000 bytes)' is not a "
                 "valid name"});
}
