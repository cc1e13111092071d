// A plugin built for a newer accgraph (audit 2026-11-25 #67): its ABI tag claims a newer minor
// than the core speaks, and its backend derives from a class only that newer core would define,
// so the dynamic loader refuses it (undefined typeinfo). The core must say which ABI it needs.
#include "accgraph/spi/plugin.h"

namespace accgraph {
// Declared as a newer accgraph's headers would; this core defines no such class (its key
// function, the destructor, lives in that newer library).
class FutureInterface {
 public:
  virtual ~FutureInterface();
  virtual int answer() const = 0;
};
}  // namespace accgraph

namespace {

__attribute__((used)) const char abi_tag[] =
    ACCGRAPH_PLUGIN_ABI_TAG_TEXT(ACCGRAPH_PLUGIN_ABI_MAJOR, 9);

class FutureBackend final : public accgraph::FutureInterface {
 public:
  int answer() const override { return 42; }
};

AccgraphStatus create(void** backend, char*, size_t) {
  *backend = new FutureBackend;
  return ACCGRAPH_STATUS_OK;
}

void destroy(void* backend) { delete static_cast<FutureBackend*>(backend); }

}  // namespace

extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {
  static AccgraphPluginApi api = {sizeof(AccgraphPluginApi),
                                  ACCGRAPH_PLUGIN_ABI_MAJOR,
                                  9,
                                  "test_future",
                                  50,
                                  "9.9-test",
                                  &create,
                                  &destroy};
  return &api;
}
