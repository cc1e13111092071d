/* The C ABI between the accgraph core and a backend plugin: one entry point returning a
 * versioned table. Plain C so that the loader's contract does not depend on C++ name mangling.
 *
 * Versioning (see Note [Plugin ABI] in registry/plugin_loader.cpp): the core accepts a table
 * whose abi_major equals ACCGRAPH_PLUGIN_ABI_MAJOR and whose abi_minor is at least
 * ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED. Tables only grow by appending fields; struct_size says how
 * much of the table the plugin was compiled with. The C++ SPI objects created through the table
 * (accgraph::Backend and what it creates) must come from the same major version of the SPI
 * headers, which is why a change to backend.hpp's classes bumps the major; a new class a backend
 * may also derive from (2.1: ClockSampling; 2.2: CaptureTail, spi/capture_tail.hpp; 2.4:
 * MarkerKernelNames, spi/marker_kernels.hpp, with the Error constructor that takes an
 * ErrorReason; 2.5: UntimedReplay, spi/untimed_replay.hpp; 2.6: DlpackDevices,
 * spi/dlpack_device.hpp), or a field appended to an options struct the core passes (2.3:
 * MarkerOptions::memory_budget, rule marker.budget) bumps the minor: an older-minor plugin still loads, and a plugin of a newer
 * minor than the core's is rejected (it may derive from a class the core's library lacks, or
 * read a field the core does not pass). */
#ifndef ACCGRAPH_PLUGIN_H
#define ACCGRAPH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACCGRAPH_PLUGIN_ABI_MAJOR 2u
#define ACCGRAPH_PLUGIN_ABI_MINOR 6u
/* The oldest minor the core accepts. */
#define ACCGRAPH_PLUGIN_ABI_MINOR_REQUIRED 0u
/* The plugin ABI a library was built for ("accgraph-plugin-abi:2u.4u"), as text the loader can find
 * in the file without loading it: when the dynamic loader refuses a plugin built for a newer
 * accgraph (it needs symbols this core lacks), the rejection then names both ABI versions instead
 * of a mangled symbol. ACCGRAPH_DEFINE_PLUGIN emits it; a plugin that writes its own table adds
 * ACCGRAPH_PLUGIN_ABI_TAG(); once, at file scope. */
#define ACCGRAPH_PLUGIN_ABI_TAG_PREFIX "accgraph-plugin-abi:"
#define ACCGRAPH_PLUGIN_ABI_STRINGIFY_(x) #x
#define ACCGRAPH_PLUGIN_ABI_STRINGIFY(x) ACCGRAPH_PLUGIN_ABI_STRINGIFY_(x)
#define ACCGRAPH_PLUGIN_ABI_TAG_TEXT(MAJOR, MINOR)              \
  ACCGRAPH_PLUGIN_ABI_TAG_PREFIX ACCGRAPH_PLUGIN_ABI_STRINGIFY( \
      MAJOR) "." ACCGRAPH_PLUGIN_ABI_STRINGIFY(MINOR)
#if defined(__GNUC__)
#define ACCGRAPH_PLUGIN_ABI_TAG()                                     \
  __attribute__((used)) static const char accgraph_plugin_abi_tag[] = \
      ACCGRAPH_PLUGIN_ABI_TAG_TEXT(ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR)
#else
#define ACCGRAPH_PLUGIN_ABI_TAG()               \
  static const char accgraph_plugin_abi_tag[] = \
      ACCGRAPH_PLUGIN_ABI_TAG_TEXT(ACCGRAPH_PLUGIN_ABI_MAJOR, ACCGRAPH_PLUGIN_ABI_MINOR)
#endif
/* The one symbol the loader resolves. */
#define ACCGRAPH_PLUGIN_ENTRY_SYMBOL "accgraph_plugin_entry"

#if defined(_WIN32)
#define ACCGRAPH_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ACCGRAPH_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Mirrors accgraph::ErrorCode; errors cross the C ABI as a status plus a message, never as
 * exceptions. */
typedef enum AccgraphStatus {
  ACCGRAPH_STATUS_OK = 0,
  ACCGRAPH_STATUS_INVALID_ARGUMENT = 1,
  ACCGRAPH_STATUS_INVALID_STATE = 2,
  ACCGRAPH_STATUS_UNAVAILABLE = 3,
  ACCGRAPH_STATUS_UNSUPPORTED = 4,
  ACCGRAPH_STATUS_BACKEND_ERROR = 5,
  ACCGRAPH_STATUS_PLUGIN_ERROR = 6
} AccgraphStatus;

/* Version 1.0 of the table. */
typedef struct AccgraphPluginApi {
  size_t struct_size;         /* sizeof(AccgraphPluginApi) as the plugin was compiled */
  uint32_t abi_major;         /* ACCGRAPH_PLUGIN_ABI_MAJOR the plugin was compiled with */
  uint32_t abi_minor;         /* ACCGRAPH_PLUGIN_ABI_MINOR the plugin was compiled with */
  const char* backend_name;   /* [a-z0-9_]+, unique in the process */
  int32_t priority;           /* see accgraph::priority (accgraph/spi/priority.hpp) */
  const char* plugin_version; /* free text, shown by `accgraph backends` */
  /* Creates the backend (an accgraph::Backend*, owned by the core until destroy_backend).
   * On failure returns a status other than OK, stores nothing in *backend and writes a
   * NUL-terminated reason into message (capacity bytes); UNAVAILABLE means "cannot run here". */
  AccgraphStatus (*create_backend)(void** backend, char* message, size_t capacity);
  void (*destroy_backend)(void* backend);
} AccgraphPluginApi;

/* The entry point's type: returns a table with static storage duration, or NULL. */
typedef const AccgraphPluginApi* (*AccgraphPluginEntry)(void);

#ifdef __cplusplus
}
#endif

#endif /* ACCGRAPH_PLUGIN_H */
