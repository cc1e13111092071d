// Plugins whose entry point throws instead of returning a table (chosen by a compile
// definition): a std exception, an exception class defined in this library (its type
// information goes away with the library: audit 3.13), a class not derived from std::exception,
// and an int. Each must be rejected by name, with the library closed and the process alive.
#include <stdexcept>

#include "accgraph/spi/plugin.h"

namespace {

class PluginOwnError : public std::exception {
 public:
  const char* what() const noexcept override { return "a plugin-defined error"; }
};

struct PlainThrowable {
  int code = 7;
};

}  // namespace

extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {
#if defined(ENTRY_THROWS_STD)
  throw std::runtime_error("entry point threw std::runtime_error");
#elif defined(ENTRY_THROWS_CUSTOM)
  throw PluginOwnError();
#elif defined(ENTRY_THROWS_PLAIN)
  throw PlainThrowable();
#else
  throw 42;
#endif
}
