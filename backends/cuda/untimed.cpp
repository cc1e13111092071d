// Untimed launches: the executable without the marker kernels that sampled timing launches for
// the replays it does not time (Note [CUDA untimed replays] in graph.cpp), and the copy of a
// foreign capture that does the same for a graph its owner launches (Note [Untimed foreign
// replays] in accgraph/spi/untimed_replay.hpp).
#include <exception>

#include "cuda_backend.hpp"
#include "cuda_capture_helpers.hpp"
#include "cuda_graph.hpp"
#include "cuda_stream.hpp"
#include "cuda_check.hpp"

namespace accgraph::detail::cuda {

// --- UntimedExecutable -------------------------------------------------------------------------

UntimedExecutable::~UntimedExecutable() {
  destroy();
  if (done_ != nullptr)
    ACCGRAPH_CUDA_LOG(cudaEventDestroy(done_), "destroying the untimed-launch event");
}

void UntimedExecutable::destroy() noexcept {
  if (exec_ == nullptr) return;
  // Note [Teardown during a capture] (graph.cpp)
  RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
  ACCGRAPH_CUDA_LOG(cudaGraphExecDestroy(exec_), "destroying the untimed executable");
  exec_ = nullptr;
}

void UntimedExecutable::build(cudaGraph_t templ) {
  DeviceGuard guard(device_);
  RelaxedCaptureModeGuard relaxed;
  destroy();
  cudaGraph_t clone = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaGraphClone(&clone, templ), "replay: cloning the graph (untimed)");
  struct CloneGuard {
    cudaGraph_t graph;
    ~CloneGuard() { ACCGRAPH_CUDA_LOG(cudaGraphDestroy(graph), "destroying a clone"); }
  } clone_guard{clone};
  strip_marker_kernels(clone);
  cudaGraphInstantiateParams params{};
  cudaError_t err = cudaGraphInstantiateWithParams(&exec_, clone, &params);
  if (err != cudaSuccess) {
    exec_ = nullptr;
    throw_cuda_error(err, "cudaGraphInstantiateWithParams",
                     "replay: instantiating the graph without its markers (untimed)");
  }
}

void UntimedExecutable::after_launch(cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (done_ == nullptr)
    ACCGRAPH_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                        "replay: creating the untimed-launch event");
  ACCGRAPH_CUDA_CHECK(cudaEventRecord(done_, stream), "replay: recording the untimed-launch event");
  recorded_ = true;
  last_stream_ = stream;
}

void UntimedExecutable::order_before(cudaStream_t stream) {
  if (!recorded_ || stream == last_stream_) return;
  ACCGRAPH_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0),
                      "replay: waiting for the graph's last untimed launch");
}

// --- the copy of a foreign capture -------------------------------------------------------------

namespace {

// Note [Untimed foreign replays]: the owner's capture, cloned before the owner ends it, launched
// without its marker kernels. Like a CudaGraph's untimed executable (Note [CUDA untimed
// replays]), it launches only on the stream of the launch before it (the owner's or its own),
// never on a capturing stream (CUDA cannot record a launch into a capture), and an owner's
// launch on another stream than its last one waits for that one's event.
class CudaCaptureCopy final : public CaptureCopy {
 public:
  CudaCaptureCopy(int device, cudaGraph_t templ) noexcept
      : device_(device), template_(templ), untimed_(device) {}
  ~CudaCaptureCopy() override {
    untimed_.destroy();
    RelaxedCaptureModeGuard relaxed(RelaxedCaptureModeGuard::Teardown{});
    ACCGRAPH_CUDA_LOG(cudaGraphDestroy(template_), "destroying a foreign capture's copy");
  }
  CudaCaptureCopy(const CudaCaptureCopy&) = delete;
  CudaCaptureCopy& operator=(const CudaCaptureCopy&) = delete;

  bool can_replay_untimed(const StreamImpl& stream_impl) const noexcept override {
    const auto* stream = dynamic_cast<const CudaStream*>(&stream_impl);
    if (stream == nullptr || stream->device() != device_) return false;
    if (launched_ && stream->handle() != last_stream_) return false;
    try {
      return !stream->is_capturing();
    } catch (const std::exception&) {
      return false;  // the launch is then a timed one, whose own check reports the failure
    }
  }

  void replay_untimed(StreamImpl& stream_impl) override {
    CudaStream& stream = as_cuda_stream(stream_impl, "replay");
    if (untimed_.exec() == nullptr) untimed_.build(template_);
    DeviceGuard guard(device_);
    cudaError_t err = cudaGraphLaunch(untimed_.exec(), stream.handle());
    if (err != cudaSuccess)
      throw_cuda_error(err, "cudaGraphLaunch", "replay (the untimed copy of a foreign graph)");
    untimed_.after_launch(stream.handle());
    launched_ = true;
    last_stream_ = stream.handle();
  }

  void before_owner_launch(StreamImpl& stream_impl) override {
    const auto* stream = dynamic_cast<const CudaStream*>(&stream_impl);
    if (stream == nullptr) return;
    untimed_.order_before(stream->handle());
    launched_ = true;
    last_stream_ = stream->handle();
  }

 private:
  int device_;
  cudaGraph_t template_;  // the clone of the owner's capture, markers and all
  UntimedExecutable untimed_;
  bool launched_ = false;
  cudaStream_t last_stream_ = nullptr;  // compared, never used after its launch
};

}  // namespace

std::unique_ptr<CaptureCopy> CudaStream::copy_capture() {
  DeviceGuard guard(device_);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  ACCGRAPH_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph),
                      "capture_end: reading the capture to copy for untimed replays");
  if (status != cudaStreamCaptureStatusActive || graph == nullptr) return nullptr;
  // A graph with memory nodes allows one live executable; event record nodes are re-bound per
  // launch by the external-events markers: such captures time every replay.
  for (cudaGraphNode_t node : graph_nodes(graph, "capture_end")) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    ACCGRAPH_CUDA_CHECK(cudaGraphNodeGetType(node, &type), "capture_end: reading a node's type");
    if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree ||
        type == cudaGraphNodeTypeEventRecord)
      return nullptr;
  }
  RelaxedCaptureModeGuard relaxed;
  cudaGraph_t clone = nullptr;
  // The copy is optional: where CUDA will not clone the graph under capture, every replay is
  // the owner's and timed (GraphReplays::sampled false says so); the owner's capture goes on.
  if (cudaGraphClone(&clone, graph) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<CudaCaptureCopy>(device_, clone);
}

}  // namespace accgraph::detail::cuda
