// The toy plugin's entry point: the one symbol accgraph's loader resolves (accgraph/spi/plugin.h).
#include <accgraph/spi/plugin.hpp>  // ACCGRAPH_DEFINE_PLUGIN and accgraph::priority

#include "toy.hpp"

// Priority normal (50) is what most plugins use: above the host backend (fallback), below cuda
// (preferred). Consequence worth knowing: with this plugin on ACCGRAPH_PLUGIN_PATH and no CUDA
// device, "toy" becomes the default backend; ACCGRAPH_BACKEND=host or --backend host picks
// another one.

#ifndef TOY_FAKE_ABI_MAJOR

ACCGRAPH_DEFINE_PLUGIN("toy", accgraph::priority::normal, "1.0", toy::make_backend())

#else

// For CI only (-DTOY_FAKE_ABI_MAJOR=ON): the table ACCGRAPH_DEFINE_PLUGIN would generate,
// written by hand so that it can claim the next ABI major, as a plugin built against a future
// accgraph would. The loader must reject the file with a message naming it and saying that the
// major versions must match, and the process must keep working without the toy backend.
extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {
  static const AccgraphPluginApi api = {
      sizeof(AccgraphPluginApi),
      ACCGRAPH_PLUGIN_ABI_MAJOR + 1,  // the lie under test
      ACCGRAPH_PLUGIN_ABI_MINOR,
      "toy",
      accgraph::priority::normal,
      "1.0 (fake ABI major)",
      [](void** backend, char* message, size_t capacity) noexcept {
        return accgraph::plugin::create_backend([] { return toy::make_backend(); }, backend,
                                                message, capacity);
      },
      &accgraph::plugin::destroy_backend,
  };
  return &api;
}

#endif
