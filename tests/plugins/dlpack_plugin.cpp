// A plugin whose backend has one device and, built with DLPACK_STATED, states the DLPack device
// of its memory (Note [DLPack devices]): ROCm for device memory, ROCm host for host memory. Built
// without it, the backend states none and gets the default. It runs no work.
#include "accgraph/registry.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "accgraph/spi/plugin.hpp"

namespace {

#ifdef DLPACK_STATED
constexpr const char* kName = "test_dlpack_stated";
constexpr int32_t kDLROCM = 10;
constexpr int32_t kDLROCMHost = 11;
#else
constexpr const char* kName = "test_dlpack_default";
#endif

[[noreturn]] void runs_nothing() {
  throw accgraph::Error(accgraph::ErrorCode::Unsupported, "this test backend runs no work", kName);
}

class DlpackBackend final : public accgraph::Backend
#ifdef DLPACK_STATED
    , public accgraph::DlpackDevices
#endif
{
 public:
  std::string name() const override { return kName; }
  std::vector<accgraph::DeviceInfo> devices() const override { return {{0, "test device"}}; }
  accgraph::Capabilities capabilities(int) const override { return {}; }
  std::unique_ptr<accgraph::StreamImpl> create_stream(int) override { runs_nothing(); }
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int, void*) override { runs_nothing(); }
  std::unique_ptr<accgraph::BufferImpl> allocate(int, size_t, accgraph::MemoryKind) override {
    runs_nothing();
  }
  std::unique_ptr<accgraph::GraphImplInterface> create_graph(const accgraph::GraphArgs&) override {
    runs_nothing();
  }
  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int, const accgraph::MarkerOptions&) override {
    runs_nothing();
  }
#ifdef DLPACK_STATED
  accgraph::DlpackDevice dlpack_device(int device,
                                       accgraph::MemoryKind kind) const noexcept override {
    return kind == accgraph::MemoryKind::Host ? accgraph::DlpackDevice{kDLROCMHost, 0}
                                              : accgraph::DlpackDevice{kDLROCM, device};
  }
#endif
};

}  // namespace

ACCGRAPH_DEFINE_PLUGIN(kName, accgraph::priority::normal, "0.0-test",
                       std::make_unique<DlpackBackend>())
