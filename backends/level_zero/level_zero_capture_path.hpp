// Internal: how a Level Zero device captures, native record-and-replay graphs or regular command
// lists, chosen from what the driver advertises and resolves (choose_capture_path; pure).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "level_zero_graph_api.hpp"

namespace accgraph::detail::level_zero {

enum class CapturePath { NativeGraph, CommandList };

const char* to_string(CapturePath path) noexcept;

/// What the driver and device say about the record-and-replay graph extension.
struct GraphSupport {
  bool ext_advertised = false;  ///< ZE_extension_record_replay_graph in the driver's extensions
  bool exp_advertised = false;  ///< ZE_experimental_record_replay_graph
  uint32_t ext_flags = 0;       ///< graphFlags answered for the Ext properties stype
  uint32_t exp_flags = 0;       ///< graphFlags answered for the Exp properties stype
  std::vector<std::string> ext_missing;  ///< Ext entry points the driver did not resolve
  std::vector<std::string> exp_missing;  ///< Exp entry points the driver did not resolve
  bool forced_command_list = false;      ///< ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list
};

struct PathChoice {
  CapturePath path = CapturePath::CommandList;
  GraphFlavor flavor = GraphFlavor::None;
  std::string reason;  ///< why, in words (shown in the device name and debug log)
};

/// Native graphs when a flavour is advertised, reports at least the immutable-graph capability
/// and resolved every entry point the backend uses (stable Ext preferred); else command lists.
PathChoice choose_capture_path(const GraphSupport& support);

}  // namespace accgraph::detail::level_zero
