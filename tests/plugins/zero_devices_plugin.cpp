// A well-formed plugin whose backend is created but reports no devices, at a priority above
// every built-in: it must never become the default backend (audit 3.19).
#include "accgraph/registry.hpp"
#include "accgraph/spi/plugin.hpp"

namespace {

[[noreturn]] void no_device() {
  throw accgraph::Error(accgraph::ErrorCode::InvalidArgument, "this test backend has no device",
                        "test_zero_devices");
}

class ZeroDevicesBackend final : public accgraph::Backend {
 public:
  std::string name() const override { return "test_zero_devices"; }
  std::vector<accgraph::DeviceInfo> devices() const override { return {}; }
  accgraph::Capabilities capabilities(int) const override { no_device(); }
  std::unique_ptr<accgraph::StreamImpl> create_stream(int) override { no_device(); }
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int, void*) override { no_device(); }
  std::unique_ptr<accgraph::BufferImpl> allocate(int, size_t, accgraph::MemoryKind) override {
    no_device();
  }
  std::unique_ptr<accgraph::GraphImplInterface> create_graph(const accgraph::GraphArgs&) override {
    no_device();
  }
  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int, const accgraph::MarkerOptions&) override {
    no_device();
  }
};

}  // namespace

ACCGRAPH_DEFINE_PLUGIN("test_zero_devices", accgraph::priority::preferred + 1, "0.0-test",
                       std::make_unique<ZeroDevicesBackend>())
