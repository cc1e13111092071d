// Fuzzes what the core checks before it trusts a plugin: the library check run before dlopen, on
// the input as a whole file (plugin::shared_library_image_problem), and the table checks
// (detail::check_plugin_table) on a table built from the input. The only acceptable failure is an
// accgraph::Error(PluginError) whose message is one line; anything else escapes or traps so that
// libFuzzer reports it.
#include <cstdint>
#include <cstring>
#include <string>

#include "accgraph/error.hpp"
#include "accgraph/spi/message_escape.hpp"
#include "accgraph/spi/plugin.h"
#include "registry_internal.hpp"
#include "shared_library.hpp"  // shared_library_image_problem

namespace {

AccgraphStatus fake_create(void**, char*, size_t) { return ACCGRAPH_STATUS_UNAVAILABLE; }
void fake_destroy(void*) {}

// Reads the input front to back; past its end every read gives zeros.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <class T>
  T take() {
    T value{};
    size_t n = sizeof(T) < size_ - offset_ ? sizeof(T) : size_ - offset_;
    std::memcpy(&value, data_ + offset_, n);
    offset_ += n;
    return value;
  }
  // `length` bytes (NUL and control bytes included), or fewer at the end of the input.
  std::string bytes(size_t length) {
    size_t n = length < size_ - offset_ ? length : size_ - offset_;
    std::string text(reinterpret_cast<const char*>(data_ + offset_), n);
    offset_ += n;
    return text;
  }
  std::string rest() { return bytes(size_ - offset_); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

void require_one_line(const std::string& text) {
  for (char c : text)
    if (c == '\n' || static_cast<unsigned char>(c) < 0x20) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The library check: must return (a reason or nothing) for any bytes.
  if (std::optional<std::string> problem =
          accgraph::plugin::shared_library_image_problem(data, size))
    require_one_line(*problem);

  Input in(data, size);
  const auto flags = in.take<uint8_t>();
  AccgraphPluginApi api{};
  api.struct_size = (flags & 1) ? in.take<uint64_t>() : sizeof(AccgraphPluginApi);
  api.abi_major = (flags & 2) ? in.take<uint32_t>() : ACCGRAPH_PLUGIN_ABI_MAJOR;
  api.abi_minor = in.take<uint32_t>();
  api.priority = in.take<int32_t>();
  api.create_backend = (flags & 4) ? nullptr : &fake_create;
  api.destroy_backend = (flags & 8) ? nullptr : &fake_destroy;
  api.plugin_version = (flags & 16) ? nullptr : "fuzz";
  const std::string path = in.bytes(in.take<uint8_t>());
  const std::string name = in.rest();  // c_str() ends it at its first NUL, as a C table would
  api.backend_name = (flags & 32) ? nullptr : name.c_str();
  const AccgraphPluginApi* table = (flags & 64) ? nullptr : &api;

  require_one_line(accgraph::plugin::escape_for_message(name));
  try {
    accgraph::detail::check_plugin_table(table, path);
  } catch (const accgraph::Error& e) {
    if (e.code() != accgraph::ErrorCode::PluginError) throw;  // escapes: a crash for libFuzzer
    require_one_line(e.what());
  }
  return 0;
}
