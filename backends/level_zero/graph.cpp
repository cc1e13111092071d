// Level Zero graphs, capture path chosen per device at start-up: native record-and-replay graphs
// (Ext or Exp flavour, see level_zero_graph_ext.hpp) or a regular command list replayed through a
// command queue (Note [Command-list capture]).
#include <fstream>

#include <fmt/format.h>

#include "common/private_pool_graph.hpp"
#include "level_zero_backend.hpp"

namespace accgraph::detail::level_zero {

namespace {

// Note [Command-list capture]: without the graph extension, a capture records the stream's
// operations into a regular command list, bracketed by two events of the graph:
//
//   recorded list:   wait(start) reset(start) ...captured work... signal(done)
//   replay on S:     S: signal(start)   queue: execute(recorded list)   S: wait(done) reset(done)
//
// so a replay runs in stream order (after S's earlier work, before its later work) and leaves
// both events reset for the next replay: `start` is reset by the recorded work that consumed it,
// before `done` is signalled, and S signals `start` again only after it saw `done` and reset it.
// Replays of one graph are serialised (as CUDA serialises launches of one executable): a replay
// on another stream than the previous one first waits for that stream. A regular list may be
// submitted again while it runs, because the queue is in-order and each execution waits for its
// own `start`.
class ZeGraph final : public PrivatePoolGraph<Runtime> {
 public:
  using PrivatePoolGraph::PrivatePoolGraph;

  ~ZeGraph() override {
    reset_for_destructor(kBackendName);
    if (queue_ != nullptr)
      ACCGRAPH_ZE_LOG(zeCommandQueueDestroy(queue_), "destroying a graph's queue");
  }

  void capture_begin(StreamImpl& stream_impl, PoolId pool, CaptureMode /*mode*/) override {
    ZeStream& stream = as_ze_stream(stream_impl, "capture_begin");
    std::shared_ptr<StreamCore> core = stream.core();
    DeviceState& device = core->device;
    std::shared_ptr<StreamCore> keep = core->keep_list_alive("capture_begin");
    std::lock_guard<std::mutex> lock(core->mutex);
    if (device.capture.path == CapturePath::NativeGraph) {
      const char* call = "";
      ze_result_t result = device.graph_api.begin_capture(core->list, &call);
      if (result != ZE_RESULT_SUCCESS) throw_error(result, call, "capture_begin");
      core->capture = StreamCapture::Native;
    } else {
      prepare_command_list_path(device);
      ze_command_list_desc_t desc{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr,
                                  device.compute_ordinal,
                                  device.in_order_flags ? kCommandListFlagInOrder : 0u};
      ze_command_list_handle_t list = nullptr;
      ACCGRAPH_ZE_CHECK(zeCommandListCreate(runtime().context, device.handle, &desc, &list),
                        "capture_begin: creating the recording list");
      recorded_ = list;
      ze_event_handle_t start = (*bracket_)[0];
      try {
        ACCGRAPH_ZE_CHECK(zeCommandListAppendWaitOnEvents(list, 1, &start), "capture_begin");
        ACCGRAPH_ZE_CHECK(zeCommandListAppendEventReset(list, start), "capture_begin");
      } catch (...) {
        destroy_recorded();
        throw;
      }
      core->recording = list;
      core->capture = StreamCapture::Recording;
    }
    core->captured_operations.clear();
    capture_core_ = std::move(core);
    device_ = &device;
    path_ = device.capture.path;
    // pool_sharing is false: the core passes only new private pools (Note [Capability gates]
    // in accgraph/spi/backend.hpp).
    if (pool.is_new_private()) take_new_pool_id();
  }

  void capture_end() override {
    std::shared_ptr<StreamCore> core = std::move(capture_core_);
    std::lock_guard<std::mutex> lock(core->mutex);
    operations_ = std::move(core->captured_operations);
    core->captured_operations.clear();
    if (path_ == CapturePath::NativeGraph) {
      core->capture = StreamCapture::None;
      const char* call = "";
      ze_graph_handle graph = nullptr;
      ze_result_t result = device_->graph_api.end_capture(core->list, &graph, &call);
      if (result != ZE_RESULT_SUCCESS) {
        operations_.clear();
        throw_error(result, call, "capture_end (the graph was reset)");
      }
      graph_ = graph;
    } else {
      core->capture = StreamCapture::None;
      core->recording = nullptr;
      try {
        ACCGRAPH_ZE_CHECK(zeCommandListAppendSignalEvent(recorded_, (*bracket_)[1]),
                          "capture_end (the graph was reset)");
        ACCGRAPH_ZE_CHECK(zeCommandListClose(recorded_), "capture_end (the graph was reset)");
      } catch (...) {
        destroy_recorded();
        operations_.clear();
        throw;
      }
    }
  }

  void instantiate() override {
    if (path_ == CapturePath::NativeGraph) {
      const char* call = "";
      ze_executable_graph_handle executable = nullptr;
      ze_result_t result = device_->graph_api.instantiate(graph_, &executable, &call);
      if (result != ZE_RESULT_SUCCESS)
        throw_error(result, call, fmt::format("instantiate ({} operations)", operations_.size()));
      exec_ = executable;
    }
    // The command-list path replays the closed list itself: nothing to build.
    count_instantiation();
  }

  void replay(StreamImpl& stream_impl) override {
    ZeStream& stream = as_ze_stream(stream_impl, "replay");
    std::shared_ptr<StreamCore> core = stream.core();
    std::shared_ptr<StreamCore> keep = core->keep_list_alive("replay");
    // See Note [Command-list capture]: replays are serialised. A previous stream whose list is
    // gone (Note [Wrapped lists]) finished its work before the list was destroyed.
    if (std::shared_ptr<StreamCore> previous = last_replay_.lock();
        previous != nullptr && previous != core && !previous->list_destroyed())
      core->wait_for(*previous);
    std::lock_guard<std::mutex> lock(core->mutex);
    // A wrapped list in the application's native capture counts (Note [Native captures of
    // wrapped lists] in stream.cpp).
    if (core->capture_state() != StreamCapture::None)
      throw Error(ErrorCode::Unsupported,
                  "replay: the stream is capturing, and level_zero cannot capture a graph inside "
                  "another: replay it after the capture ends (capture_end, or the native end "
                  "of capture for a wrapped list)",
                  kBackendName);
    if (path_ == CapturePath::NativeGraph) {
      const char* call = "";
      ze_result_t result = device_->graph_api.append(core->list, exec_, nullptr, 0, nullptr, &call);
      if (result != ZE_RESULT_SUCCESS) throw_error(result, call, "replay");
      core->order_after_append(core->list);
    } else {
      ze_event_handle_t start = (*bracket_)[0];
      ze_event_handle_t done = (*bracket_)[1];
      ACCGRAPH_ZE_CHECK(zeCommandListAppendSignalEvent(core->list, start), "replay");
      ACCGRAPH_ZE_CHECK(zeCommandQueueExecuteCommandLists(queue_, 1, &recorded_, nullptr),
                        "replay");
      ACCGRAPH_ZE_CHECK(zeCommandListAppendWaitOnEvents(core->list, 1, &done), "replay");
      ACCGRAPH_ZE_CHECK(zeCommandListAppendEventReset(core->list, done), "replay");
    }
    last_replay_ = core;
  }

  void reset() override {
    if (capture_core_) abort_capture();
    // Replays still running use the executable, the list and the bracket events.
    if (std::shared_ptr<StreamCore> previous = last_replay_.lock();
        previous != nullptr && !previous->list_destroyed())
      previous->synchronize();
    last_replay_.reset();
    if (queue_ != nullptr)
      ACCGRAPH_ZE_CHECK(zeCommandQueueSynchronize(queue_, UINT64_MAX),
                        "reset: waiting for replays");
    const char* call = "";
    if (exec_ != nullptr) {
      ze_result_t result = device_->graph_api.destroy_executable(exec_, &call);
      if (result != ZE_RESULT_SUCCESS) log_failure(result, call, "reset");
      exec_ = nullptr;
    }
    if (graph_ != nullptr) {
      ze_result_t result = device_->graph_api.destroy_graph(graph_, &call);
      if (result != ZE_RESULT_SUCCESS) log_failure(result, call, "reset");
      graph_ = nullptr;
    }
    destroy_recorded();
    if (bracket_) {
      ACCGRAPH_ZE_LOG(zeEventHostReset((*bracket_)[0]), "reset");
      ACCGRAPH_ZE_LOG(zeEventHostReset((*bracket_)[1]), "reset");
    }
    operations_.clear();
  }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    if (path_ == CapturePath::NativeGraph && graph_ != nullptr && device_->graph_api.can_dump()) {
      const char* call = "";
      ze_result_t result = device_->graph_api.dump(graph_, path.c_str(), &call);
      if (result != ZE_RESULT_SUCCESS)
        throw_error(result, call, fmt::format("debug_dump to '{}'", path));
      return;
    }
    // The command-list path (or a driver without a dump entry point): the recorded operations.
    write_debug_dump(path, kBackendName, [&](std::ostream& out) {
      out << fmt::format("digraph level_zero_graph {{\n  label=\"level_zero graph ({})\";\n",
                         to_string(path_));
      for (size_t i = 0; i < operations_.size(); ++i) {
        out << fmt::format("  n{} [shape=box, label=\"{}\"];\n", i, operations_[i]);
        if (i > 0) out << fmt::format("  n{} -> n{};\n", i - 1, i);
      }
      out << "}\n";
    });
  }

 private:
  size_t captured_operations() const noexcept override { return operations_.size(); }

  void prepare_command_list_path(DeviceState& device) {
    if (!bracket_)
      bracket_ = std::make_unique<EventSet>(runtime(), 2, "capture_begin: creating events");
    if (queue_ != nullptr) return;
    const ze_command_queue_desc_t desc = compute_queue_desc(device);
    ACCGRAPH_ZE_CHECK(zeCommandQueueCreate(runtime().context, device.handle, &desc, &queue_),
                      "capture_begin: creating the replay queue");
  }

  // Caller does not hold the core's mutex.
  void abort_capture() noexcept {
    std::shared_ptr<StreamCore> core = std::move(capture_core_);
    std::lock_guard<std::mutex> lock(core->mutex);
    core->captured_operations.clear();
    if (core->capture == StreamCapture::Native) {
      const char* call = "";
      ze_graph_handle graph = nullptr;
      ze_result_t result = device_->graph_api.end_capture(core->list, &graph, &call);
      if (result != ZE_RESULT_SUCCESS) log_failure(result, call, "aborting a capture");
      if (graph != nullptr) {
        result = device_->graph_api.destroy_graph(graph, &call);
        if (result != ZE_RESULT_SUCCESS) log_failure(result, call, "aborting a capture");
      }
    }
    core->capture = StreamCapture::None;
    core->recording = nullptr;
    destroy_recorded();
  }

  void destroy_recorded() noexcept {
    if (recorded_ == nullptr) return;
    ACCGRAPH_ZE_LOG(zeCommandListDestroy(recorded_), "destroying a recorded command list");
    recorded_ = nullptr;
  }

  bool debug_ = false;
  DeviceState* device_ = nullptr;
  CapturePath path_ = CapturePath::CommandList;
  std::shared_ptr<StreamCore> capture_core_;  // while capturing
  std::weak_ptr<StreamCore> last_replay_;     // the stream of the latest replay
  std::vector<std::string> operations_;
  // Native path.
  ze_graph_handle graph_ = nullptr;
  ze_executable_graph_handle exec_ = nullptr;
  // Command-list path.
  ze_command_list_handle_t recorded_ = nullptr;
  ze_command_queue_handle_t queue_ = nullptr;
  std::unique_ptr<EventSet> bracket_;  // [0] start, [1] done
};

}  // namespace

// GraphArgs holds nothing a level_zero graph reads: the core honours keep_graph (it calls
// instantiate).
std::unique_ptr<GraphImplInterface> make_graph(std::shared_ptr<Runtime> runtime,
                                               const GraphArgs& /*args*/) {
  return std::make_unique<ZeGraph>(std::move(runtime));
}

}  // namespace accgraph::detail::level_zero
