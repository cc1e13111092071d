// The Level Zero record-and-replay graph extension, declared here because the Debian headers
// (API 1.4) predate it: handles, capability structure, result codes and entry-point types of the
// stable ...Ext and the older ...Exp flavours. Entry points are resolved at run time.
//
// Sources (the same ones the CPU test driver was written from; this backend must not include
// test-support headers, so the declarations it needs are repeated here):
//   - Level Zero specification 1.17+, "Record and Replay Graph Extension"
//     (ZE_extension_record_replay_graph), core/EXT_RecordReplayGraph.html, and its source
//     oneapi-src/level-zero-spec scripts/core/graph.yml: signatures, argument order, capability
//     flags, documented result codes.
//   - intel/compute-runtime level_zero/include/level_zero/driver_experimental/zex_graph.h
//     (ZE_experimental_record_replay_graph): names, argument order, the _EXP result codes.
//   - intel/llvm unified-runtime source/adapters/level_zero/v2/device.cpp: the Exp properties
//     stype 0x00030029, and that the Ext and Exp properties structures share one layout.
//
// Note [Graph Ext vs Exp]: the flavours differ in
//   * argument order: Ext puts pNext BEFORE the output handle (zeGraphInstantiateExt(graph,
//     pNext, phExec), zeCommandListEndGraphCaptureExt(list, pNext, phGraph)); Exp puts it LAST
//     (zeCommandListInstantiateGraphExp(graph, phExec, pNext) -- note the other name too);
//   * pNext constness (Ext const void*, Exp void*; Exp rejects a non-null pNext);
//   * result codes: Ext queries answer ZE_RESULT_QUERY_TRUE/QUERY_FALSE (core values of API
//     >= 1.17), Exp ones 0x7fff0000/0x7fff0001; Ext misuse is reported with specific codes
//     (COMMAND_LIST_NOT_CAPTURING, GRAPH_CAPTURE_UNSUPPORTED), Exp misuse with INVALID_ARGUMENT.
// GraphApi (level_zero_graph_api.hpp) hides these differences from the rest of the backend.
//
// CAUTION: the numeric values of the stable result codes other than QUERY_FALSE (0x78000023,
// quoted from a newer ze_api.h) and of the Ext properties stype are not printed in the spec text
// and were not verified against a >= 1.17 ze_api.h; the _EXP values and 0x00030029 are verified.
// A wrong guess can only make the capability query answer "no graphs" (the backend then records
// into regular command lists) or make an error name read "unknown": it cannot select a wrong
// entry point.
#pragma once

#include <cstdint>

#include <level_zero/ze_api.h>

namespace accgraph::detail::level_zero {

// Handles (shared by Ext and Exp). Declared at global scope in the spec; ours are distinct
// types in this namespace so that a future ze_api.h with the real ones does not clash.
struct GraphTag;
struct ExecutableGraphTag;
using ze_graph_handle = GraphTag*;
using ze_executable_graph_handle = ExecutableGraphTag*;

inline constexpr const char* kGraphExtName = "ZE_extension_record_replay_graph";
inline constexpr const char* kGraphExpName = "ZE_experimental_record_replay_graph";

/// ze_record_replay_graph_ext_flags_t (the Exp flags have the same bits).
inline constexpr uint32_t kGraphFlagImmutable = 1u << 0;  ///< the minimum this backend needs
inline constexpr uint32_t kGraphFlagMutable = 1u << 1;

/// ze_record_replay_graph_ext_properties_t, chained into ze_device_properties_t::pNext.
struct GraphProperties {
  ze_structure_type_t stype;
  void* pNext;
  uint32_t graphFlags;
};

inline constexpr auto kGraphExpPropertiesStype = static_cast<ze_structure_type_t>(0x00030029);
inline constexpr auto kGraphExtPropertiesStype =
    static_cast<ze_structure_type_t>(0x00030030);  // CAUTION

// Result codes (CAUTION above for the Ext ones).
inline constexpr auto kResultQueryTrue = static_cast<ze_result_t>(0x78000022);
inline constexpr auto kResultQueryFalse = static_cast<ze_result_t>(0x78000023);
inline constexpr auto kResultErrorInvalidGraph = static_cast<ze_result_t>(0x78000024);
inline constexpr auto kResultErrorGraphCaptureUnsupported = static_cast<ze_result_t>(0x78000025);
inline constexpr auto kResultErrorCommandListNotCapturing = static_cast<ze_result_t>(0x78000026);
inline constexpr auto kResultErrorGraphUnjoinedForks = static_cast<ze_result_t>(0x78000027);
inline constexpr auto kResultQueryTrueExp = static_cast<ze_result_t>(0x7fff0000);
inline constexpr auto kResultQueryFalseExp = static_cast<ze_result_t>(0x7fff0001);
inline constexpr auto kResultErrorInvalidGraphExp = static_cast<ze_result_t>(0x7fff0002);

extern "C" {
// Stable flavour (spec 1.17).
using PfnGraphDestroyExt = ze_result_t (*)(ze_graph_handle);
using PfnBeginGraphCaptureExt = ze_result_t (*)(ze_command_list_handle_t, const void* pNext);
using PfnEndGraphCaptureExt = ze_result_t (*)(ze_command_list_handle_t, const void* pNext,
                                              ze_graph_handle* phGraph);
using PfnIsGraphCaptureEnabledExt = ze_result_t (*)(ze_command_list_handle_t);
using PfnGraphInstantiateExt = ze_result_t (*)(ze_graph_handle, const void* pNext,
                                               ze_executable_graph_handle* phExecutable);
using PfnAppendGraphExt = ze_result_t (*)(ze_command_list_handle_t, ze_executable_graph_handle,
                                          const void* pNext, ze_event_handle_t hSignalEvent,
                                          uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents);
using PfnExecutableGraphDestroyExt = ze_result_t (*)(ze_executable_graph_handle);
using PfnGraphDumpContentsExt = ze_result_t (*)(ze_graph_handle, const char* filePath,
                                                const void* pNext);

// Experimental flavour (compute-runtime zex_graph.h): pNext last and non-const.
using PfnGraphDestroyExp = ze_result_t (*)(ze_graph_handle);
using PfnBeginGraphCaptureExp = ze_result_t (*)(ze_command_list_handle_t, void* pNext);
using PfnEndGraphCaptureExp = ze_result_t (*)(ze_command_list_handle_t, ze_graph_handle* phGraph,
                                              void* pNext);
using PfnIsGraphCaptureEnabledExp = ze_result_t (*)(ze_command_list_handle_t);
using PfnInstantiateGraphExp = ze_result_t (*)(ze_graph_handle,
                                               ze_executable_graph_handle* phExecutable,
                                               void* pNext);
using PfnAppendGraphExp = ze_result_t (*)(ze_command_list_handle_t, ze_executable_graph_handle,
                                          void* pNext, ze_event_handle_t hSignalEvent,
                                          uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents);
using PfnExecutableGraphDestroyExp = ze_result_t (*)(ze_executable_graph_handle);
using PfnGraphDumpContentsExp = ze_result_t (*)(ze_graph_handle, const char* filePath, void* pNext);
}  // extern "C"

}  // namespace accgraph::detail::level_zero
