// What a Stream holds (core-internal): the backend's StreamImpl plus what the core tracks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "accgraph/backend.hpp"

namespace accgraph {
class AcceleratorGraph;
}

namespace accgraph::detail {

struct StreamState {
  std::unique_ptr<StreamImpl> impl;
  Backend* backend = nullptr;
  std::string backend_name;
  uint64_t id = 0;
  Capabilities capabilities;  // of the stream's device, read once at creation
  // The graph whose capture this stream began or joined (fork). Only meaningful while
  // impl->is_capturing(): Stream::capturing_graph() checks that before using it.
  AcceleratorGraph* capturing_graph = nullptr;
  uint64_t operations = 0;
};

}  // namespace accgraph::detail
