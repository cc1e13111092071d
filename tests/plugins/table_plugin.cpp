// Plugins whose table is malformed in one way each (chosen by a compile definition): a wrong ABI
// major, a table smaller than ABI 1.0, an invalid backend name. All must be rejected by name.
#include <cstring>

#include "accgraph/plugin.h"

namespace {

AccgraphStatus create(void** backend, char* message, size_t capacity) {
  *backend = nullptr;
  std::strncpy(message, "must never be called: the table is rejected first", capacity - 1);
  return ACCGRAPH_STATUS_BACKEND_ERROR;
}

void destroy(void*) {}

}  // namespace

extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {
  static AccgraphPluginApi api = {sizeof(AccgraphPluginApi), ACCGRAPH_PLUGIN_ABI_MAJOR,
                                  ACCGRAPH_PLUGIN_ABI_MINOR, "test_table",
                                  50, "0.0-test", &create, &destroy};
#if defined(TABLE_BAD_MAJOR)
  api.abi_major = ACCGRAPH_PLUGIN_ABI_MAJOR + 1;
#elif defined(TABLE_TOO_SMALL)
  api.struct_size = sizeof(size_t) + 2 * sizeof(uint32_t);
#elif defined(TABLE_BAD_NAME)
  api.backend_name = "Not A Name!";
#endif
  return &api;
}
