// Internal: the record-and-replay graph extension's entry points, resolved at run time for one
// flavour (Ext or Exp) and called through one Ext-shaped interface (GraphApi).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <level_zero/ze_api.h>

#include "level_zero_graph_ext.hpp"

namespace accgraph::detail::level_zero {

/// Which flavour of the graph extension a device uses (Note [Graph Ext vs Exp]).
enum class GraphFlavor { None, Ext, Exp };

const char* to_string(GraphFlavor flavor) noexcept;

/// The graph extension's entry points for one flavour, resolved with
/// zeDriverGetExtensionFunctionAddress, behind one Ext-shaped interface (Note [Graph Ext vs Exp]).
class GraphApi {
 public:
  GraphApi() = default;
  /// Resolves the entry points of `flavor`; the names it could not resolve go to `missing`
  /// (the dump and capture-query entry points are optional and never listed).
  static GraphApi resolve(ze_driver_handle_t driver, GraphFlavor flavor,
                          std::vector<std::string>& missing);

  GraphFlavor flavor() const noexcept { return flavor_; }
  bool can_dump() const noexcept;
  /// zeCommandListIsGraphCaptureEnabled{Ext,Exp} was resolved (Note [Native captures of wrapped
  /// lists] in stream.cpp).
  bool can_query_capture() const noexcept;

  /// Each returns the driver's result; `call` names the entry point used, for errors.
  ze_result_t begin_capture(ze_command_list_handle_t list, const char** call) const;
  ze_result_t end_capture(ze_command_list_handle_t list, ze_graph_handle* graph,
                          const char** call) const;
  ze_result_t instantiate(ze_graph_handle graph, ze_executable_graph_handle* executable,
                          const char** call) const;
  ze_result_t append(ze_command_list_handle_t list, ze_executable_graph_handle executable,
                     ze_event_handle_t signal, uint32_t wait_count, ze_event_handle_t* waits,
                     const char** call) const;
  ze_result_t destroy_graph(ze_graph_handle graph, const char** call) const;
  ze_result_t destroy_executable(ze_executable_graph_handle executable, const char** call) const;
  ze_result_t dump(ze_graph_handle graph, const char* path, const char** call) const;
  /// Whether `list` records into a graph: the driver's result, QUERY_TRUE/QUERY_FALSE of this
  /// flavour when it answers (read it with query_answer).
  ze_result_t is_capture_enabled(ze_command_list_handle_t list, const char** call) const;
  /// A query's answer in this flavour's codes: true for QUERY_TRUE, false for QUERY_FALSE,
  /// nothing for any other result (an error, or a code this backend does not know).
  std::optional<bool> query_answer(ze_result_t result) const noexcept;

 private:
  GraphFlavor flavor_ = GraphFlavor::None;
  // Ext
  PfnBeginGraphCaptureExt begin_ext_ = nullptr;
  PfnEndGraphCaptureExt end_ext_ = nullptr;
  PfnGraphInstantiateExt instantiate_ext_ = nullptr;
  PfnAppendGraphExt append_ext_ = nullptr;
  PfnGraphDestroyExt destroy_graph_ext_ = nullptr;
  PfnExecutableGraphDestroyExt destroy_executable_ext_ = nullptr;
  PfnGraphDumpContentsExt dump_ext_ = nullptr;
  PfnIsGraphCaptureEnabledExt is_capturing_ext_ = nullptr;
  // Exp
  PfnBeginGraphCaptureExp begin_exp_ = nullptr;
  PfnEndGraphCaptureExp end_exp_ = nullptr;
  PfnInstantiateGraphExp instantiate_exp_ = nullptr;
  PfnAppendGraphExp append_exp_ = nullptr;
  PfnGraphDestroyExp destroy_graph_exp_ = nullptr;
  PfnExecutableGraphDestroyExp destroy_executable_exp_ = nullptr;
  PfnGraphDumpContentsExp dump_exp_ = nullptr;
  PfnIsGraphCaptureEnabledExp is_capturing_exp_ = nullptr;
};

}  // namespace accgraph::detail::level_zero
