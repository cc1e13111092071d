// ForeignGraph: the lifecycle of a graph its owner captures and launches natively, raised as an
// AcceleratorGraph's hooks (Note [Foreign graphs] in accgraph/foreign_graph.hpp).
#include "accgraph/foreign_graph.hpp"

#include <exception>
#include <string>

#include <fmt/format.h>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/untimed_replay.hpp"
#include "accgraph/stream.hpp"

namespace accgraph {

namespace {

// The backend graph of a foreign graph: the owner does the capturing and launching, so every
// step is empty except replay, which runs the owner's launch handed over by ForeignGraph::launch,
// and the untimed launches of the capture's copy (Note [Untimed foreign replays] in
// spi/untimed_replay.hpp), which the core makes instead where sampling skips a replay.
class ForeignGraphImpl final : public GraphImplInterface, public UntimedReplay {
 public:
  void (*launch_call)(void*) = nullptr;
  void* launch_context = nullptr;
  bool copy_wanted = false;      // capture_end(UntimedCopy::Make) is ending the capture
  bool untimed_allowed = false;  // ForeignGraph::enable_untimed_launches

  void capture_begin(StreamImpl& stream, PoolId, CaptureMode) override {
    copy_.reset();
    capture_stream_ = &stream;
  }
  // The markers ended (on_capture_ending); the owner's capture is still open.
  void capture_end() override {
    StreamImpl* stream = capture_stream_;
    capture_stream_ = nullptr;
    if (!copy_wanted || stream == nullptr) return;
    if (CapturedWork* work = captured_work_of(*stream)) copy_ = work->copy_capture();
  }
  void instantiate() override {}
  void replay(StreamImpl& stream) override {
    // AcceleratorGraph::replay refuses foreign graphs, so only ForeignGraph::launch gets here.
    if (launch_call == nullptr)
      throw Error(ErrorCode::InvalidState,
                  "replay: a foreign graph is launched by its owner: call "
                  "ForeignGraph::launch(stream, fn)");
    if (copy_) copy_->before_owner_launch(stream);
    launch_call(launch_context);
  }
  bool can_replay_untimed(const StreamImpl& stream) const noexcept override {
    return untimed_allowed && copy_ && copy_->can_replay_untimed(stream);
  }
  void replay_untimed(StreamImpl& stream) override { copy_->replay_untimed(stream); }
  bool has_copy() const noexcept { return copy_ != nullptr; }
  void reset() override {
    copy_.reset();
    capture_stream_ = nullptr;
  }
  PoolId pool() const override { return {}; }
  void enable_debug_mode() override {}
  void debug_dump(const std::string&) override {
    throw Error(ErrorCode::Unsupported,
                "debug_dump: a foreign graph belongs to its owner: dump it with the owner's API "
                "(cudaGraphDebugDotPrint, torch.cuda.CUDAGraph.debug_dump)");
  }

 private:
  StreamImpl* capture_stream_ = nullptr;  // from capture_begin to capture_end
  std::unique_ptr<CaptureCopy> copy_;
};

// Clears the owner's launch and the caller's LaunchWaits when the launch is over, also when it
// throws.
class LaunchScope {
 public:
  LaunchScope(ForeignGraphImpl& impl, void (*call)(void*), void* context, LaunchWaits*& slot,
              LaunchWaits* waits)
      : impl_(impl), slot_(slot) {
    impl_.launch_call = call;
    impl_.launch_context = context;
    slot_ = waits;
  }
  ~LaunchScope() {
    impl_.launch_call = nullptr;
    impl_.launch_context = nullptr;
    slot_ = nullptr;
  }
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  ForeignGraphImpl& impl_;
  LaunchWaits*& slot_;
};

}  // namespace

ForeignGraph::ForeignGraph(std::string_view backend)
    : graph_(new AcceleratorGraph(AcceleratorGraph::ForeignTag{}, backend,
                                  std::make_unique<ForeignGraphImpl>())) {}

ForeignGraph::~ForeignGraph() = default;  // ~AcceleratorGraph: on_destroy, then any abort

void ForeignGraph::capture_begin(Stream& stream) { graph_->capture_begin(stream); }

void ForeignGraph::capture_end() { graph_->capture_end(); }

void ForeignGraph::capture_end(UntimedCopy copy) {
  auto& impl = static_cast<ForeignGraphImpl&>(*graph_->impl_);
  impl.copy_wanted = copy == UntimedCopy::Make;
  try {
    graph_->capture_end();
  } catch (...) {
    impl.copy_wanted = false;
    throw;
  }
  impl.copy_wanted = false;
}

void ForeignGraph::enable_untimed_launches(bool enabled) noexcept {
  static_cast<ForeignGraphImpl&>(*graph_->impl_).untimed_allowed = enabled;
}

bool ForeignGraph::has_untimed_copy() const noexcept {
  return static_cast<const ForeignGraphImpl&>(*graph_->impl_).has_copy();
}

void ForeignGraph::reset() { graph_->reset(); }

void ForeignGraph::launch_with(Stream& stream, void (*call)(void*), void* context,
                               LaunchCheck check, LaunchWaits* waits) {
  if (graph_->state() != GraphState::Instantiated)
    throw Error(ErrorCode::InvalidState,
                fmt::format("launch: foreign graph {} has no finished capture ({}): call "
                            "capture_begin(stream) after the native capture began and "
                            "capture_end() before it ends, then launch",
                            graph_->id(), to_string(graph_->state())),
                graph_->backend_name());
  LaunchScope scope(static_cast<ForeignGraphImpl&>(*graph_->impl_), call, context,
                    graph_->launch_waits_, waits);
  graph_->fenced_launch_ = check == LaunchCheck::Fenced;
  graph_->replay_on(stream);
}

void ForeignGraph::launch_with(Stream& stream, void (*call)(void*), void* context,
                               LaunchCheck check) {
  launch_with(stream, call, context, check, nullptr);
}

}  // namespace accgraph
