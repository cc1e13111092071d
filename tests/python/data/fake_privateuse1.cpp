// A fake PrivateUse1 device for tests/python/accelerator_graph_cases.py: just enough (a device
// guard that synchronizes nothing, a DeviceAllocator on malloc) that torch.accelerator.Graph's
// context manager runs its whole path on the CPU, and a second GraphImplInterface ("torch's own")
// to register next to accgraph's. Built for the installed torch >= 2.12 by the cases.
#include <ATen/core/GraphImplInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

constexpr c10::DeviceType kFake = c10::DeviceType::PrivateUse1;

struct FakeGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kFake; }
  c10::Device exchangeDevice(c10::Device) const override { return {kFake, 0}; }
  c10::Device getDevice() const override { return {kFake, 0}; }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const override {
    return c10::Stream(c10::Stream::DEFAULT, {kFake, 0});
  }
  c10::Stream exchangeStream(c10::Stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, {kFake, 0});
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

struct FakeAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = std::malloc(n == 0 ? 1 : n);
    return {p, p, &std::free, c10::Device(kFake, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &std::free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex) override {
    return {};
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex) override {}
};

FakeAllocator fake_allocator;
std::atomic<int> other_created{0};

// "Torch's own" implementation: does nothing, counts how often the registry made one.
struct OtherGraph final : at::GraphImplInterface {
  void capture_begin(at::MempoolId_t, at::GraphCaptureMode) override {}
  void capture_end() override {}
  void instantiate() override {}
  void replay() override {}
  void reset() override {}
  at::MempoolId_t pool() const override { return {0, 0}; }
  void enable_debug_mode() override {}
  void debug_dump(const std::string&) override {}
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, FakeGuard)

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install_allocator", [] { c10::SetAllocator(kFake, &fake_allocator); });
  m.def("register_other", [](const std::string& key, int priority) {
    at::GraphImplRegistry()->Register(
        key,
        [](at::GraphImplArgs) -> std::unique_ptr<at::GraphImplInterface> {
          ++other_created;
          return std::make_unique<OtherGraph>();
        },
        static_cast<c10::RegistryPriority>(priority));
  });
  m.def("other_created", [] { return other_created.load(); });
}
