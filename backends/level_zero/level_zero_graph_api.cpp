// GraphApi: resolves the graph extension's entry points of one flavour and calls them with that
// flavour's argument order (Note [Graph Ext vs Exp] in level_zero_graph_ext.hpp).
#include "level_zero_graph_api.hpp"

namespace accgraph::detail::level_zero {

const char* to_string(GraphFlavor flavor) noexcept {
  switch (flavor) {
    case GraphFlavor::Ext:
      return kGraphExtName;
    case GraphFlavor::Exp:
      return kGraphExpName;
    default:
      return "none";
  }
}

namespace {

/// Whether a driver of the flavour must have an entry point: a missing required one is listed.
enum class Need { Required, Optional };

template <class Pfn>
void lookup(ze_driver_handle_t driver, const char* name, Pfn& out,
            std::vector<std::string>* missing) {
  void* address = nullptr;
  ze_result_t result = zeDriverGetExtensionFunctionAddress(driver, name, &address);
  if (result != ZE_RESULT_SUCCESS || address == nullptr) {
    out = nullptr;
    if (missing != nullptr) missing->emplace_back(name);
    return;
  }
  out = reinterpret_cast<Pfn>(address);
}

}  // namespace

GraphApi GraphApi::resolve(ze_driver_handle_t driver, GraphFlavor flavor,
                           std::vector<std::string>& missing) {
  GraphApi api;
  api.flavor_ = flavor;
  if (flavor == GraphFlavor::None) return api;
  // One line an entry point, its two flavours side by side (as in the calls below); a driver
  // without the optional ones still captures.
  const bool ext = flavor == GraphFlavor::Ext;
  auto find = [&](const char* ext_name, auto& ext_fn, const char* exp_name, auto& exp_fn,
                  Need need) {
    std::vector<std::string>* report = need == Need::Required ? &missing : nullptr;
    if (ext)
      lookup(driver, ext_name, ext_fn, report);
    else
      lookup(driver, exp_name, exp_fn, report);
  };
  find("zeCommandListBeginGraphCaptureExt", api.begin_ext_, "zeCommandListBeginGraphCaptureExp",
       api.begin_exp_, Need::Required);
  find("zeCommandListEndGraphCaptureExt", api.end_ext_, "zeCommandListEndGraphCaptureExp",
       api.end_exp_, Need::Required);
  find("zeGraphInstantiateExt", api.instantiate_ext_, "zeCommandListInstantiateGraphExp",
       api.instantiate_exp_, Need::Required);
  find("zeCommandListAppendGraphExt", api.append_ext_, "zeCommandListAppendGraphExp",
       api.append_exp_, Need::Required);
  find("zeGraphDestroyExt", api.destroy_graph_ext_, "zeGraphDestroyExp", api.destroy_graph_exp_,
       Need::Required);
  find("zeExecutableGraphDestroyExt", api.destroy_executable_ext_, "zeExecutableGraphDestroyExp",
       api.destroy_executable_exp_, Need::Required);
  find("zeGraphDumpContentsExt", api.dump_ext_, "zeGraphDumpContentsExp", api.dump_exp_,
       Need::Optional);
  find("zeCommandListIsGraphCaptureEnabledExt", api.is_capturing_ext_,
       "zeCommandListIsGraphCaptureEnabledExp", api.is_capturing_exp_, Need::Optional);
  return api;
}

bool GraphApi::can_dump() const noexcept {
  return flavor_ == GraphFlavor::Ext ? dump_ext_ != nullptr : dump_exp_ != nullptr;
}

bool GraphApi::can_query_capture() const noexcept {
  return flavor_ == GraphFlavor::Ext ? is_capturing_ext_ != nullptr : is_capturing_exp_ != nullptr;
}

std::optional<bool> GraphApi::query_answer(ze_result_t result) const noexcept {
  // Only this flavour's codes: an Exp driver's 0x7fff0000 is no answer to an Ext query.
  const bool ext = flavor_ == GraphFlavor::Ext;
  if (result == (ext ? kResultQueryTrue : kResultQueryTrueExp)) return true;
  if (result == (ext ? kResultQueryFalse : kResultQueryFalseExp)) return false;
  return std::nullopt;
}

// A flavour that was not resolved answers UNSUPPORTED_FEATURE instead of calling a null pointer.
#define ACCGRAPH_ZE_GRAPH_CALL(EXT_PTR, EXT_NAME, EXT_ARGS, EXP_PTR, EXP_NAME, EXP_ARGS) \
  if (flavor_ == GraphFlavor::Ext) {                                                     \
    *call = EXT_NAME;                                                                    \
    return EXT_PTR ? EXT_PTR EXT_ARGS : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;             \
  }                                                                                      \
  *call = EXP_NAME;                                                                      \
  return EXP_PTR ? EXP_PTR EXP_ARGS : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE

ze_result_t GraphApi::begin_capture(ze_command_list_handle_t list, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(begin_ext_, "zeCommandListBeginGraphCaptureExt", (list, nullptr),
                         begin_exp_, "zeCommandListBeginGraphCaptureExp", (list, nullptr));
}

ze_result_t GraphApi::end_capture(ze_command_list_handle_t list, ze_graph_handle* graph,
                                  const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(end_ext_, "zeCommandListEndGraphCaptureExt", (list, nullptr, graph),
                         end_exp_, "zeCommandListEndGraphCaptureExp", (list, graph, nullptr));
}

ze_result_t GraphApi::instantiate(ze_graph_handle graph, ze_executable_graph_handle* executable,
                                  const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(instantiate_ext_, "zeGraphInstantiateExt", (graph, nullptr, executable),
                         instantiate_exp_, "zeCommandListInstantiateGraphExp",
                         (graph, executable, nullptr));
}

ze_result_t GraphApi::append(ze_command_list_handle_t list, ze_executable_graph_handle executable,
                             ze_event_handle_t signal, uint32_t wait_count,
                             ze_event_handle_t* waits, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(append_ext_, "zeCommandListAppendGraphExt",
                         (list, executable, nullptr, signal, wait_count, waits), append_exp_,
                         "zeCommandListAppendGraphExp",
                         (list, executable, nullptr, signal, wait_count, waits));
}

ze_result_t GraphApi::destroy_graph(ze_graph_handle graph, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(destroy_graph_ext_, "zeGraphDestroyExt", (graph), destroy_graph_exp_,
                         "zeGraphDestroyExp", (graph));
}

ze_result_t GraphApi::destroy_executable(ze_executable_graph_handle executable,
                                         const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(destroy_executable_ext_, "zeExecutableGraphDestroyExt", (executable),
                         destroy_executable_exp_, "zeExecutableGraphDestroyExp", (executable));
}

ze_result_t GraphApi::dump(ze_graph_handle graph, const char* path, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(dump_ext_, "zeGraphDumpContentsExt", (graph, path, nullptr), dump_exp_,
                         "zeGraphDumpContentsExp", (graph, path, nullptr));
}

ze_result_t GraphApi::is_capture_enabled(ze_command_list_handle_t list, const char** call) const {
  ACCGRAPH_ZE_GRAPH_CALL(is_capturing_ext_, "zeCommandListIsGraphCaptureEnabledExt", (list),
                         is_capturing_exp_, "zeCommandListIsGraphCaptureEnabledExp", (list));
}

#undef ACCGRAPH_ZE_GRAPH_CALL

}  // namespace accgraph::detail::level_zero
