// Declarations of the Level Zero record-and-replay graph extension (stable ...Ext and older
// ...Exp).
//
// The Debian 12 headers (API 1.4) predate this extension, so the types, result codes and function
// pointer types are declared here. A client resolves the entry points at run time with
// zeDriverGetExtensionFunctionAddress and must check every pointer.
//
// Sources (read 2025/2026; "Ext" = stable, "Exp" = experimental predecessor):
//   - Stable spec, "Record and Replay Graph Extension" (ZE_extension_record_replay_graph), Level
//   Zero
//     spec 1.17+:
//     https://oneapi-src.github.io/level-zero-spec/level-zero/latest/core/EXT_RecordReplayGraph.html
//     and its source oneapi-src/level-zero-spec scripts/core/graph.yml (signatures, argument order,
//     capability flags, documented result codes).
//   - Experimental header intel/compute-runtime
//   level_zero/include/level_zero/driver_experimental/zex_graph.h
//     (ZE_experimental_record_replay_graph: names, argument order, ZE_RESULT_*_EXP values).
//   - intel/compute-runtime level_zero/api/driver_experimental/.../graph (legacy Exp entry points
//   are thin
//     wrappers that reorder arguments and translate QUERY_TRUE/QUERY_FALSE/INVALID_GRAPH to the
//     _EXP codes).
//   - intel/llvm unified-runtime source/adapters/level_zero/v2/device.cpp (the Exp properties stype
//   0x00030029
//     and the fact that the Ext and Exp properties structures have the same layout).
//
// Differences a client must handle (Note [Graph Ext vs Exp]):
//   * argument order: Ext puts `pNext` BEFORE the output handle (zeGraphCreateExt(ctx, pNext,
//   phGraph),
//     zeCommandListEndGraphCaptureExt(list, pNext, phGraph), zeGraphInstantiateExt(graph, pNext,
//     phExec)); Exp puts `pNext` LAST (zeGraphCreateExp(ctx, phGraph, pNext),
//     ...EndGraphCaptureExp(list, phGraph, pNext), zeCommandListInstantiateGraphExp(graph, phExec,
//     pNext)). Note the Exp instantiate has a different NAME.
//   * Exp pNext is `void*`, Ext pNext is `const void*`. Exp rejects a non-null pNext
//   (compute-runtime).
//   * query results: Ext returns ZE_RESULT_QUERY_TRUE/QUERY_FALSE/ERROR_INVALID_GRAPH (core
//   ze_result_t
//     values), Exp returns the 0x7fff000x values below.
//   * errors: Ext uses the spec's codes (INVALID_NULL_HANDLE, INVALID_NULL_POINTER,
//     ERROR_COMMAND_LIST_NOT_CAPTURING, ERROR_GRAPH_CAPTURE_UNSUPPORTED); Exp answers
//     ZE_RESULT_ERROR_INVALID_ARGUMENT for every misuse, as compute-runtime does.
//   * Ext adds zeExecutableGraphGetSourceGraphExt, zeGraphGetPrimaryCommandListExt (1.17) and
//     zeGraphPauseCaptureExt, zeGraphResumeCaptureExt, zeGraphGetIdExt (1.18); Exp has none of
//     these.
//
// Capability query: chain a ze_record_replay_graph_ext_properties_t (stype
// ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES, or the Exp value 0x00030029 for an Exp-only
// driver) into ze_device_properties_t::pNext and call zeDeviceGetProperties; IMMUTABLE_GRAPH is the
// minimum needed.
//
// CAUTION (values not verified): the spec text does not print the numeric values of the stable
// result codes and structure type, and no ze_api.h >= 1.17 was available to read.
// ZE_RESULT_QUERY_FALSE = 0x78000023 is quoted from a newer ze_api.h; the others below are best
// guesses and are only guaranteed to agree between this driver and clients that include this
// header. A client built against a real >= 1.17 ze_api.h should use that header's values. The _EXP
// values are verified.
#pragma once

#include <level_zero/ze_api.h>

#include <cstdint>

// -- handles (shared by Ext and Exp)
// ------------------------------------------------------------------------
typedef struct _ze_graph_handle_t* ze_graph_handle_t;
typedef struct _ze_executable_graph_handle_t* ze_executable_graph_handle_t;

// -- names
// --------------------------------------------------------------------------------------------------
#define ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_EXT_NAME "ZE_extension_record_replay_graph"
#define ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_EXP_NAME "ZE_experimental_record_replay_graph"

// -- capability flags (ze_record_replay_graph_ext_flags_t / _exp_flags_t: same bits)
// --------------------------
typedef uint32_t ze_record_replay_graph_ext_flags_t;
enum : uint32_t {
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_IMMUTABLE_GRAPH = 1u << 0,  // minimum for a working graph
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_MUTABLE_GRAPH = 1u << 1,
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_SUBGRAPHS = 1u << 2,           // Ext only
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_APPEND_COMMANDLIST = 1u << 3,  // Ext only
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_FLAG_CB_EXTERNAL_IPC = 1u << 4,     // Ext only
};

// Chained into ze_device_properties_t::pNext. Layout identical for Ext and Exp; only stype differs.
typedef struct _ze_record_replay_graph_ext_properties_t {
  ze_structure_type_t stype;                      // [in]
  void* pNext;                                    // [in,out][optional]
  ze_record_replay_graph_ext_flags_t graphFlags;  // [out]
} ze_record_replay_graph_ext_properties_t;

// stype values. EXP verified (compute-runtime zex_common.h via unified-runtime); EXT is a guess
// (see CAUTION).
#define ACCGRAPH_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXP_PROPERTIES \
  static_cast<ze_structure_type_t>(0x00030029)
#define ACCGRAPH_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES \
  static_cast<ze_structure_type_t>(0x00030030)

// Dump descriptor accepted as pNext of zeGraphDumpContents{Ext,Exp}.
typedef enum _ze_record_replay_graph_ext_dump_mode_t {
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_DUMP_MODE_DETAILED = 0,
  ACCGRAPH_ZE_RECORD_REPLAY_GRAPH_DUMP_MODE_SIMPLE = 1,
} ze_record_replay_graph_ext_dump_mode_t;

// -- result codes
// --------------------------------------------------------------------------------------------- Exp
// (verified, compute-runtime zex_graph.h):
#define ACCGRAPH_ZE_RESULT_QUERY_TRUE_EXP static_cast<ze_result_t>(0x7fff0000)
#define ACCGRAPH_ZE_RESULT_QUERY_FALSE_EXP static_cast<ze_result_t>(0x7fff0001)
#define ACCGRAPH_ZE_RESULT_ERROR_INVALID_GRAPH_EXP static_cast<ze_result_t>(0x7fff0002)
// Ext (core ze_result_t in API >= 1.17; QUERY_FALSE quoted, the rest guessed -- see CAUTION):
#define ACCGRAPH_ZE_RESULT_QUERY_TRUE static_cast<ze_result_t>(0x78000022)
#define ACCGRAPH_ZE_RESULT_QUERY_FALSE static_cast<ze_result_t>(0x78000023)
#define ACCGRAPH_ZE_RESULT_ERROR_INVALID_GRAPH static_cast<ze_result_t>(0x78000024)
#define ACCGRAPH_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED static_cast<ze_result_t>(0x78000025)
#define ACCGRAPH_ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING static_cast<ze_result_t>(0x78000026)
#define ACCGRAPH_ZE_RESULT_ERROR_GRAPH_UNJOINED_FORKS static_cast<ze_result_t>(0x78000027)

extern "C" {
// Called when a graph is destroyed (zeGraphSetDestructionCallback{Ext,Exp}).
typedef void (*zex_mem_graph_free_callback_fn_t)(void* pUserData);

// -- stable entry points, ZE_extension_record_replay_graph (spec 1.17; Pause/Resume/GetId 1.18)
// ----------------
typedef ze_result_t (*ze_pfnGraphCreateExt_t)(ze_context_handle_t hContext, const void* pNext,
                                              ze_graph_handle_t* phGraph);
typedef ze_result_t (*ze_pfnCommandListBeginGraphCaptureExt_t)(
    ze_command_list_handle_t hCommandList, const void* pNext);
typedef ze_result_t (*ze_pfnCommandListBeginCaptureIntoGraphExt_t)(
    ze_command_list_handle_t hCommandList, ze_graph_handle_t hGraph, const void* pNext);
typedef ze_result_t (*ze_pfnCommandListIsGraphCaptureEnabledExt_t)(
    ze_command_list_handle_t hCommandList);
typedef ze_result_t (*ze_pfnCommandListEndGraphCaptureExt_t)(ze_command_list_handle_t hCommandList,
                                                             const void* pNext,
                                                             ze_graph_handle_t* phGraph);
typedef ze_result_t (*ze_pfnCommandListGetGraphExt_t)(ze_command_list_handle_t hCommandList,
                                                      ze_graph_handle_t* phGraph);
typedef ze_result_t (*ze_pfnGraphGetPrimaryCommandListExt_t)(
    ze_graph_handle_t hGraph, ze_command_list_handle_t* phCommandList);
typedef ze_result_t (*ze_pfnGraphSetDestructionCallbackExt_t)(
    ze_graph_handle_t hGraph, zex_mem_graph_free_callback_fn_t pfnCallback, void* pUserData,
    const void* pNext);
typedef ze_result_t (*ze_pfnGraphInstantiateExt_t)(ze_graph_handle_t hGraph, const void* pNext,
                                                   ze_executable_graph_handle_t* phExecutableGraph);
typedef ze_result_t (*ze_pfnCommandListAppendGraphExt_t)(
    ze_command_list_handle_t hCommandList, ze_executable_graph_handle_t hGraph, const void* pNext,
    ze_event_handle_t hSignalEvent, uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents);
typedef ze_result_t (*ze_pfnExecutableGraphGetSourceGraphExt_t)(ze_executable_graph_handle_t hGraph,
                                                                ze_graph_handle_t* phSourceGraph);
typedef ze_result_t (*ze_pfnGraphIsEmptyExt_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphDumpContentsExt_t)(ze_graph_handle_t hGraph, const char* filePath,
                                                    const void* pNext);
typedef ze_result_t (*ze_pfnExecutableGraphDestroyExt_t)(ze_executable_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphDestroyExt_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphPauseCaptureExt_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphResumeCaptureExt_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphGetIdExt_t)(ze_graph_handle_t hGraph, uint64_t* pGraphId);

// -- experimental entry points, ZE_experimental_record_replay_graph (compute-runtime zex_graph.h)
// -------------
typedef ze_result_t (*ze_pfnGraphCreateExp_t)(ze_context_handle_t hContext,
                                              ze_graph_handle_t* phGraph, void* pNext);
typedef ze_result_t (*ze_pfnCommandListBeginGraphCaptureExp_t)(
    ze_command_list_handle_t hCommandList, void* pNext);
typedef ze_result_t (*ze_pfnCommandListBeginCaptureIntoGraphExp_t)(
    ze_command_list_handle_t hCommandList, ze_graph_handle_t hGraph, void* pNext);
typedef ze_result_t (*ze_pfnCommandListEndGraphCaptureExp_t)(ze_command_list_handle_t hCommandList,
                                                             ze_graph_handle_t* phGraph,
                                                             void* pNext);
typedef ze_result_t (*ze_pfnCommandListInstantiateGraphExp_t)(
    ze_graph_handle_t hGraph, ze_executable_graph_handle_t* phExecutableGraph, void* pNext);
typedef ze_result_t (*ze_pfnCommandListAppendGraphExp_t)(
    ze_command_list_handle_t hCommandList, ze_executable_graph_handle_t hGraph, void* pNext,
    ze_event_handle_t hSignalEvent, uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents);
typedef ze_result_t (*ze_pfnGraphDestroyExp_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnExecutableGraphDestroyExp_t)(ze_executable_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnCommandListIsGraphCaptureEnabledExp_t)(
    ze_command_list_handle_t hCommandList);
typedef ze_result_t (*ze_pfnGraphIsEmptyExp_t)(ze_graph_handle_t hGraph);
typedef ze_result_t (*ze_pfnGraphDumpContentsExp_t)(ze_graph_handle_t hGraph, const char* filePath,
                                                    void* pNext);
typedef ze_result_t (*ze_pfnCommandListGetGraphExp_t)(ze_command_list_handle_t hCommandList,
                                                      ze_graph_handle_t* phGraph);
typedef ze_result_t (*ze_pfnGraphSetDestructionCallbackExp_t)(
    ze_graph_handle_t hGraph, zex_mem_graph_free_callback_fn_t pfnCallback, void* pUserData,
    void* pNext);
}  // extern "C"
