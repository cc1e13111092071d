// Plugins with a hand-written table (chosen by a compile definition), each wrong in one way or
// made to test one thing: a wrong ABI major, a table smaller than ABI 1.0, an invalid backend
// name, a name made to forge an output line, a create_backend that throws a non-standard
// exception or leaves its message without a NUL, and a well-formed "twin" built twice under two
// file names (the second copy must be rejected as a duplicate and unmapped).
#include <cstring>

#include "accgraph/spi/plugin.h"

namespace {

AccgraphStatus create(void** backend, char* message, size_t capacity) {
  *backend = nullptr;
#if defined(TABLE_FACTORY_THROWS_INT)
  (void)message;
  (void)capacity;
  throw 42;  // breaks the C ABI contract on purpose (audit 3.15)
#elif defined(TABLE_FACTORY_MESSAGE_NO_NUL)
  // Fills every byte of the buffer and writes no NUL (audit 3.17): a head the test can find,
  // then 'x' up to the last byte, then 'Z' in the last byte.
  const char head[] = "no_nul_message:";
  std::memset(message, 'x', capacity);
  std::memcpy(message, head, sizeof(head) - 1);
  message[capacity - 1] = 'Z';
  return ACCGRAPH_STATUS_UNAVAILABLE;
#elif defined(TABLE_TWIN)
  std::strncpy(message, "the twin test plugin has no device", capacity - 1);
  return ACCGRAPH_STATUS_UNAVAILABLE;
#else
  std::strncpy(message, "must never be called: the table is rejected first", capacity - 1);
  return ACCGRAPH_STATUS_BACKEND_ERROR;
#endif
}

void destroy(void*) {}

}  // namespace

extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {
  static AccgraphPluginApi api = {sizeof(AccgraphPluginApi),
                                  ACCGRAPH_PLUGIN_ABI_MAJOR,
                                  ACCGRAPH_PLUGIN_ABI_MINOR,
                                  "test_table",
                                  50,
                                  "0.0-test",
                                  &create,
                                  &destroy};
#if defined(TABLE_BAD_MAJOR)
  api.abi_major = ACCGRAPH_PLUGIN_ABI_MAJOR + 1;
#elif defined(TABLE_TOO_SMALL)
  api.struct_size = sizeof(size_t) + 2 * sizeof(uint32_t);
#elif defined(TABLE_BAD_NAME)
  api.backend_name = "Not A Name!";
#elif defined(TABLE_NAME_NEWLINE)
  api.backend_name = "a\nrejected plugin /fake: spoofed";
#elif defined(TABLE_FACTORY_THROWS_INT)
  api.backend_name = "test_factory_throws_int";
#elif defined(TABLE_FACTORY_MESSAGE_NO_NUL)
  api.backend_name = "test_message_no_nul";
#elif defined(TABLE_TWIN)
  api.backend_name = "test_twin";
#endif
  return &api;
}
