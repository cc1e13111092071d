// Record-and-replay graphs of the CPU Level Zero driver: the stable ...Ext and the older ...Exp
// entry points.
//
// Capture on an immediate list diverts its appends into a Graph instead of its worker (see submit()
// in cmdlist.cpp); instantiation snapshots the recorded commands; appending the executable graph
// runs them, in order, as one command of the destination list. Both API flavours share one
// implementation and differ only in argument order and result codes (Note [Graph Ext vs Exp] in
// backends/level_zero/level_zero_graph_ext.hpp).
//
// Not modelled: forks/joins across lists, subgraphs, mutable graphs, and the spec's rule that host
// waits on recorded work fail with ERROR_GRAPH_CAPTURE_UNSUPPORTED (such a wait here simply blocks
// until replay).
#include "driver.h"

#include <cstring>
#include <fstream>

namespace zecpu {
namespace {

enum class Flavor { Ext, Exp };

// Result codes that differ between the flavours.
struct Codes {
  ze_result_t query_true, query_false, invalid_graph;
  ze_result_t null_handle, null_pointer, not_capturing, capture_unsupported;
};

const Codes& codes(Flavor flavor) {
  static const Codes ext{ACCGRAPH_ZE_RESULT_QUERY_TRUE,
                         ACCGRAPH_ZE_RESULT_QUERY_FALSE,
                         ACCGRAPH_ZE_RESULT_ERROR_INVALID_GRAPH,
                         ZE_RESULT_ERROR_INVALID_NULL_HANDLE,
                         ZE_RESULT_ERROR_INVALID_NULL_POINTER,
                         ACCGRAPH_ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING,
                         ACCGRAPH_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED};
  // compute-runtime's Exp entry points answer INVALID_ARGUMENT for every misuse.
  static const Codes exp{ACCGRAPH_ZE_RESULT_QUERY_TRUE_EXP,
                         ACCGRAPH_ZE_RESULT_QUERY_FALSE_EXP,
                         ACCGRAPH_ZE_RESULT_ERROR_INVALID_GRAPH_EXP,
                         ZE_RESULT_ERROR_INVALID_ARGUMENT,
                         ZE_RESULT_ERROR_INVALID_ARGUMENT,
                         ZE_RESULT_ERROR_INVALID_ARGUMENT,
                         ZE_RESULT_ERROR_INVALID_ARGUMENT};
  return flavor == Flavor::Ext ? ext : exp;
}

// Exp rejects any extension structure (compute-runtime); Ext accepts and ignores unknown ones.
bool pnext_rejected(Flavor flavor, const void* next) {
  return flavor == Flavor::Exp && next != nullptr;
}

// Serialises the graph entry points; lock order is graph_mutex() before CommandList::mutex.
std::mutex& graph_mutex() {
  static std::mutex mutex;
  return mutex;
}

Graph* new_graph() {
  static std::atomic<uint64_t> next_id{1};  // zeGraphGetIdExt: increasing and unique in the process
  auto* graph = new Graph();
  graph->id = next_id++;
  return graph;
}

ze_result_t graph_create(Flavor flavor, ze_context_handle_t context, const void* next,
                         ze_graph_handle_t* out) {
  if (resolve<Context>(context) == nullptr) return codes(flavor).null_handle;
  if (out == nullptr) return codes(flavor).null_pointer;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  *out = reinterpret_cast<ze_graph_handle_t>(new_graph());
  return ZE_RESULT_SUCCESS;
}

ze_result_t begin_capture(Flavor flavor, ze_command_list_handle_t list_handle,
                          ze_graph_handle_t graph_handle, const void* next) {
  CommandList* list = resolve<CommandList>(list_handle);
  if (list == nullptr) return codes(flavor).null_handle;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> graph_lock(graph_mutex());
  Graph* graph = nullptr;
  if (graph_handle != nullptr) {
    graph = resolve<Graph>(graph_handle);
    if (graph == nullptr) return codes(flavor).null_handle;
    // The spec requires an empty graph that is not being recorded.
    if (!graph->commands.empty() || graph->captured || graph->capturing != nullptr ||
        graph->paused != nullptr)
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  std::lock_guard<std::mutex> list_lock(list->mutex);
  if (!list->immediate || list->capture_target != nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (graph == nullptr) graph = new_graph();  // handed to the application by end_capture
  graph->capturing = list;
  graph->primary = list_handle;  // as the application knows it
  list->capture_target = graph;
  return ZE_RESULT_SUCCESS;
}

ze_result_t is_capture_enabled(Flavor flavor, ze_command_list_handle_t list_handle) {
  CommandList* list = resolve<CommandList>(list_handle);
  if (list == nullptr) return codes(flavor).null_handle;
  std::lock_guard<std::mutex> lock(list->mutex);
  return list->capture_target != nullptr ? codes(flavor).query_true : codes(flavor).query_false;
}

ze_result_t end_capture(Flavor flavor, ze_command_list_handle_t list_handle, const void* next,
                        ze_graph_handle_t* out) {
  CommandList* list = resolve<CommandList>(list_handle);
  if (list == nullptr) return codes(flavor).null_handle;
  if (out == nullptr) return codes(flavor).null_pointer;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> graph_lock(graph_mutex());
  std::lock_guard<std::mutex> list_lock(list->mutex);
  Graph* graph = list->capture_target;
  if (graph == nullptr) return codes(flavor).not_capturing;
  list->capture_target = nullptr;
  graph->capturing = nullptr;
  graph->captured = true;
  *out = reinterpret_cast<ze_graph_handle_t>(graph);
  return ZE_RESULT_SUCCESS;
}

ze_result_t get_graph(Flavor flavor, ze_command_list_handle_t list_handle, ze_graph_handle_t* out) {
  CommandList* list = resolve<CommandList>(list_handle);
  if (list == nullptr) return codes(flavor).null_handle;
  if (out == nullptr) return codes(flavor).null_pointer;
  std::lock_guard<std::mutex> lock(list->mutex);
  *out = reinterpret_cast<ze_graph_handle_t>(list->capture_target);
  return list->capture_target != nullptr ? ZE_RESULT_SUCCESS : codes(flavor).not_capturing;
}

ze_result_t set_destruction_callback(Flavor flavor, ze_graph_handle_t graph_handle,
                                     zex_mem_graph_free_callback_fn_t callback, void* user_data,
                                     const void* next) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return codes(flavor).null_handle;
  if (callback == nullptr) return codes(flavor).null_pointer;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(graph_mutex());
  graph->destruction_callbacks.emplace_back(callback, user_data);
  return ZE_RESULT_SUCCESS;
}

ze_result_t instantiate(Flavor flavor, ze_graph_handle_t graph_handle, const void* next,
                        ze_executable_graph_handle_t* out) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return codes(flavor).null_handle;
  if (out == nullptr) return codes(flavor).null_pointer;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(graph_mutex());
  if (!graph->captured)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // still recording, or never recorded
  auto* executable = new ExecutableGraph();
  executable->source = graph;
  executable->commands = std::make_shared<const std::vector<Command>>(graph->commands);
  ++graph->executables;
  *out = reinterpret_cast<ze_executable_graph_handle_t>(executable);
  return ZE_RESULT_SUCCESS;
}

ze_result_t append_graph(Flavor flavor, ze_command_list_handle_t list_handle,
                         ze_executable_graph_handle_t executable_handle, const void* next,
                         ze_event_handle_t signal, uint32_t num_waits, ze_event_handle_t* waits) {
  CommandList* list = resolve<CommandList>(list_handle);
  ExecutableGraph* executable = resolve<ExecutableGraph>(executable_handle);
  if (list == nullptr || executable == nullptr) return codes(flavor).null_handle;
  if (pnext_rejected(flavor, next)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  {
    // Appending a graph while capturing would make it a subgraph, which this driver does not
    // support.
    std::lock_guard<std::mutex> lock(list->mutex);
    if (list->capture_target != nullptr) return codes(flavor).capture_unsupported;
  }
  Event* signal_event_ptr = nullptr;
  std::vector<Event*> wait_events;
  const ze_result_t result =
      resolve_events(signal, num_waits, waits, &signal_event_ptr, &wait_events);
  if (result != ZE_RESULT_SUCCESS) return result;
  // The whole replay is one command of the destination list, so hSignalEvent fires after all of it.
  auto replay = [commands = executable->commands] {
    for (const Command& command : *commands) command.run();
  };
  return submit(list,
                make_command("Graph", std::move(replay), signal_event_ptr, std::move(wait_events)));
}

ze_result_t executable_get_source(ze_executable_graph_handle_t executable_handle,
                                  ze_graph_handle_t* out) {
  ExecutableGraph* executable = resolve<ExecutableGraph>(executable_handle);
  if (executable == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *out = reinterpret_cast<ze_graph_handle_t>(executable->source);
  return ZE_RESULT_SUCCESS;
}

ze_result_t get_primary_command_list(ze_graph_handle_t graph_handle,
                                     ze_command_list_handle_t* out) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  std::lock_guard<std::mutex> lock(graph_mutex());
  *out = graph->primary;
  return ZE_RESULT_SUCCESS;
}

// Copies the recorded command names, locking the recording list if capture is still running.
std::vector<std::string> command_names(Graph* graph) {
  std::unique_lock<std::mutex> list_lock;
  if (graph->capturing != nullptr)
    list_lock = std::unique_lock<std::mutex>(graph->capturing->mutex);
  std::vector<std::string> names;
  for (const Command& command : graph->commands) names.push_back(command.name);
  return names;
}

ze_result_t is_empty(Flavor flavor, ze_graph_handle_t graph_handle) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return codes(flavor).null_handle;
  std::lock_guard<std::mutex> lock(graph_mutex());
  return command_names(graph).empty() ? codes(flavor).query_true : codes(flavor).query_false;
}

ze_result_t dump_contents(Flavor flavor, ze_graph_handle_t graph_handle, const char* path,
                          const void* next) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return codes(flavor).null_handle;
  if (path == nullptr) return codes(flavor).null_pointer;
  (void)next;  // the dump descriptor only selects a level of detail; there is one here
  std::lock_guard<std::mutex> lock(graph_mutex());
  std::ofstream out(path);
  if (!out) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  out << "digraph graph_" << graph->id << " {\n";
  const std::vector<std::string> names = command_names(graph);
  for (size_t i = 0; i < names.size(); ++i) {
    out << "  n" << i << " [label=\"" << names[i] << "\"];\n";
    if (i > 0) out << "  n" << i - 1 << " -> n" << i << ";\n";
  }
  out << "}\n";
  return out ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNKNOWN;
}

ze_result_t executable_destroy(Flavor flavor, ze_executable_graph_handle_t executable_handle) {
  ExecutableGraph* executable = resolve<ExecutableGraph>(executable_handle);
  if (executable == nullptr) return codes(flavor).null_handle;
  --executable->source->executables;
  delete executable;  // a running replay keeps the commands alive through its shared_ptr
  return ZE_RESULT_SUCCESS;
}

ze_result_t graph_destroy(Flavor flavor, ze_graph_handle_t graph_handle) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return codes(flavor).null_handle;
  std::vector<std::pair<zex_mem_graph_free_callback_fn_t, void*>> callbacks;
  {
    std::lock_guard<std::mutex> lock(graph_mutex());
    if (graph->executables > 0 || graph->capturing != nullptr)
      return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    if (graph->paused != nullptr) {
      std::lock_guard<std::mutex> list_lock(graph->paused->mutex);
      graph->paused = nullptr;
    }
    callbacks = std::move(graph->destruction_callbacks);
    delete graph;
  }
  for (const auto& callback : callbacks)
    callback.first(callback.second);  // outside the lock: may call back in
  return ZE_RESULT_SUCCESS;
}

ze_result_t pause_capture(ze_graph_handle_t graph_handle) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(graph_mutex());
  if (graph->capturing == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // not recording
  CommandList* list = graph->capturing;
  std::lock_guard<std::mutex> list_lock(list->mutex);
  list->capture_target = nullptr;
  graph->capturing = nullptr;
  graph->paused = list;
  return ZE_RESULT_SUCCESS;
}

ze_result_t resume_capture(ze_graph_handle_t graph_handle) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(graph_mutex());
  if (graph->paused == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // not paused
  CommandList* list = graph->paused;
  std::lock_guard<std::mutex> list_lock(list->mutex);
  if (list->capture_target != nullptr)
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // list records another graph
  list->capture_target = graph;
  graph->capturing = list;
  graph->paused = nullptr;
  return ZE_RESULT_SUCCESS;
}

ze_result_t get_id(ze_graph_handle_t graph_handle, uint64_t* id) {
  Graph* graph = resolve<Graph>(graph_handle);
  if (graph == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (id == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  *id = graph->id;
  return ZE_RESULT_SUCCESS;
}

// -- the entry points, with each flavour's own parameter order
// ----------------------------------------------------

extern "C" {
// ZE_extension_record_replay_graph
ze_result_t zecpu_graph_create_ext(ze_context_handle_t c, const void* next, ze_graph_handle_t* g) {
  return graph_create(Flavor::Ext, c, next, g);
}
ze_result_t zecpu_begin_graph_capture_ext(ze_command_list_handle_t l, const void* next) {
  return begin_capture(Flavor::Ext, l, nullptr, next);
}
ze_result_t zecpu_begin_capture_into_graph_ext(ze_command_list_handle_t l, ze_graph_handle_t g,
                                               const void* next) {
  if (g == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return begin_capture(Flavor::Ext, l, g, next);
}
ze_result_t zecpu_is_graph_capture_enabled_ext(ze_command_list_handle_t l) {
  return is_capture_enabled(Flavor::Ext, l);
}
ze_result_t zecpu_end_graph_capture_ext(ze_command_list_handle_t l, const void* next,
                                        ze_graph_handle_t* g) {
  return end_capture(Flavor::Ext, l, next, g);
}
ze_result_t zecpu_get_graph_ext(ze_command_list_handle_t l, ze_graph_handle_t* g) {
  return get_graph(Flavor::Ext, l, g);
}
ze_result_t zecpu_get_primary_command_list_ext(ze_graph_handle_t g, ze_command_list_handle_t* l) {
  return get_primary_command_list(g, l);
}
ze_result_t zecpu_set_destruction_callback_ext(ze_graph_handle_t g,
                                               zex_mem_graph_free_callback_fn_t cb, void* user,
                                               const void* next) {
  return set_destruction_callback(Flavor::Ext, g, cb, user, next);
}
ze_result_t zecpu_instantiate_ext(ze_graph_handle_t g, const void* next,
                                  ze_executable_graph_handle_t* e) {
  return instantiate(Flavor::Ext, g, next, e);
}
ze_result_t zecpu_append_graph_ext(ze_command_list_handle_t l, ze_executable_graph_handle_t e,
                                   const void* next, ze_event_handle_t signal, uint32_t n,
                                   ze_event_handle_t* waits) {
  return append_graph(Flavor::Ext, l, e, next, signal, n, waits);
}
ze_result_t zecpu_executable_get_source_ext(ze_executable_graph_handle_t e, ze_graph_handle_t* g) {
  return executable_get_source(e, g);
}
ze_result_t zecpu_is_empty_ext(ze_graph_handle_t g) { return is_empty(Flavor::Ext, g); }
ze_result_t zecpu_dump_contents_ext(ze_graph_handle_t g, const char* path, const void* next) {
  return dump_contents(Flavor::Ext, g, path, next);
}
ze_result_t zecpu_executable_destroy_ext(ze_executable_graph_handle_t e) {
  return executable_destroy(Flavor::Ext, e);
}
ze_result_t zecpu_graph_destroy_ext(ze_graph_handle_t g) { return graph_destroy(Flavor::Ext, g); }
ze_result_t zecpu_pause_capture_ext(ze_graph_handle_t g) { return pause_capture(g); }
ze_result_t zecpu_resume_capture_ext(ze_graph_handle_t g) { return resume_capture(g); }
ze_result_t zecpu_get_id_ext(ze_graph_handle_t g, uint64_t* id) { return get_id(g, id); }

// ZE_experimental_record_replay_graph: pNext last, output handle before it.
ze_result_t zecpu_graph_create_exp(ze_context_handle_t c, ze_graph_handle_t* g, void* next) {
  return graph_create(Flavor::Exp, c, next, g);
}
ze_result_t zecpu_begin_graph_capture_exp(ze_command_list_handle_t l, void* next) {
  return begin_capture(Flavor::Exp, l, nullptr, next);
}
ze_result_t zecpu_begin_capture_into_graph_exp(ze_command_list_handle_t l, ze_graph_handle_t g,
                                               void* next) {
  if (g == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return begin_capture(Flavor::Exp, l, g, next);
}
ze_result_t zecpu_end_graph_capture_exp(ze_command_list_handle_t l, ze_graph_handle_t* g,
                                        void* next) {
  return end_capture(Flavor::Exp, l, next, g);
}
ze_result_t zecpu_instantiate_graph_exp(ze_graph_handle_t g, ze_executable_graph_handle_t* e,
                                        void* next) {
  return instantiate(Flavor::Exp, g, next, e);
}
ze_result_t zecpu_append_graph_exp(ze_command_list_handle_t l, ze_executable_graph_handle_t e,
                                   void* next, ze_event_handle_t signal, uint32_t n,
                                   ze_event_handle_t* waits) {
  return append_graph(Flavor::Exp, l, e, next, signal, n, waits);
}
ze_result_t zecpu_graph_destroy_exp(ze_graph_handle_t g) { return graph_destroy(Flavor::Exp, g); }
ze_result_t zecpu_executable_destroy_exp(ze_executable_graph_handle_t e) {
  return executable_destroy(Flavor::Exp, e);
}
ze_result_t zecpu_is_graph_capture_enabled_exp(ze_command_list_handle_t l) {
  return is_capture_enabled(Flavor::Exp, l);
}
ze_result_t zecpu_is_empty_exp(ze_graph_handle_t g) { return is_empty(Flavor::Exp, g); }
ze_result_t zecpu_dump_contents_exp(ze_graph_handle_t g, const char* path, void* next) {
  return dump_contents(Flavor::Exp, g, path, next);
}
ze_result_t zecpu_get_graph_exp(ze_command_list_handle_t l, ze_graph_handle_t* g) {
  return get_graph(Flavor::Exp, l, g);
}
ze_result_t zecpu_set_destruction_callback_exp(ze_graph_handle_t g,
                                               zex_mem_graph_free_callback_fn_t cb, void* user,
                                               void* next) {
  return set_destruction_callback(Flavor::Exp, g, cb, user, next);
}
}  // extern "C"

struct NamedFunction {
  const char* name;
  void* address;
};

// The static_casts check each wrapper against the function pointer type declared in ze_graph_ext.h.
#define ZECPU_ENTRY(api_name, wrapper)                                                \
  NamedFunction {                                                                     \
#api_name, reinterpret_cast < void*>(static_cast <ze_pfn##api_name##_t>(wrapper)) \
  }

const NamedFunction kGraphFunctions[] = {
    ZECPU_ENTRY(GraphCreateExt, zecpu_graph_create_ext),
    ZECPU_ENTRY(CommandListBeginGraphCaptureExt, zecpu_begin_graph_capture_ext),
    ZECPU_ENTRY(CommandListBeginCaptureIntoGraphExt, zecpu_begin_capture_into_graph_ext),
    ZECPU_ENTRY(CommandListIsGraphCaptureEnabledExt, zecpu_is_graph_capture_enabled_ext),
    ZECPU_ENTRY(CommandListEndGraphCaptureExt, zecpu_end_graph_capture_ext),
    ZECPU_ENTRY(CommandListGetGraphExt, zecpu_get_graph_ext),
    ZECPU_ENTRY(GraphGetPrimaryCommandListExt, zecpu_get_primary_command_list_ext),
    ZECPU_ENTRY(GraphSetDestructionCallbackExt, zecpu_set_destruction_callback_ext),
    ZECPU_ENTRY(GraphInstantiateExt, zecpu_instantiate_ext),
    ZECPU_ENTRY(CommandListAppendGraphExt, zecpu_append_graph_ext),
    ZECPU_ENTRY(ExecutableGraphGetSourceGraphExt, zecpu_executable_get_source_ext),
    ZECPU_ENTRY(GraphIsEmptyExt, zecpu_is_empty_ext),
    ZECPU_ENTRY(GraphDumpContentsExt, zecpu_dump_contents_ext),
    ZECPU_ENTRY(ExecutableGraphDestroyExt, zecpu_executable_destroy_ext),
    ZECPU_ENTRY(GraphDestroyExt, zecpu_graph_destroy_ext),
    ZECPU_ENTRY(GraphPauseCaptureExt, zecpu_pause_capture_ext),
    ZECPU_ENTRY(GraphResumeCaptureExt, zecpu_resume_capture_ext),
    ZECPU_ENTRY(GraphGetIdExt, zecpu_get_id_ext),
    ZECPU_ENTRY(GraphCreateExp, zecpu_graph_create_exp),
    ZECPU_ENTRY(CommandListBeginGraphCaptureExp, zecpu_begin_graph_capture_exp),
    ZECPU_ENTRY(CommandListBeginCaptureIntoGraphExp, zecpu_begin_capture_into_graph_exp),
    ZECPU_ENTRY(CommandListEndGraphCaptureExp, zecpu_end_graph_capture_exp),
    ZECPU_ENTRY(CommandListInstantiateGraphExp, zecpu_instantiate_graph_exp),
    ZECPU_ENTRY(CommandListAppendGraphExp, zecpu_append_graph_exp),
    ZECPU_ENTRY(GraphDestroyExp, zecpu_graph_destroy_exp),
    ZECPU_ENTRY(ExecutableGraphDestroyExp, zecpu_executable_destroy_exp),
    ZECPU_ENTRY(CommandListIsGraphCaptureEnabledExp, zecpu_is_graph_capture_enabled_exp),
    ZECPU_ENTRY(GraphIsEmptyExp, zecpu_is_empty_exp),
    ZECPU_ENTRY(GraphDumpContentsExp, zecpu_dump_contents_exp),
    ZECPU_ENTRY(CommandListGetGraphExp, zecpu_get_graph_exp),
    ZECPU_ENTRY(GraphSetDestructionCallbackExp, zecpu_set_destruction_callback_exp),
};

}  // namespace

void* graph_function_address(const char* name) {
  if (name[0] != 'z' || name[1] != 'e') return nullptr;
  for (const NamedFunction& function : kGraphFunctions) {
    if (std::strcmp(function.name, name + 2) == 0) return function.address;
  }
  return nullptr;
}

}  // namespace zecpu
