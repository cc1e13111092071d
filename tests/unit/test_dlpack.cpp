// Tests of dlpack.hpp: the DLPack device a backend states for its memory, and the default for a
// backend that states none (Note [DLPack devices] in accgraph/spi/dlpack_device.hpp), through
// plugins loaded by path and the built-in host backend.
#include <doctest/doctest.h>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/dlpack_device.hpp"
#include "check_error.hpp"

using accgraph::DlpackDevice;
using accgraph::MemoryKind;
namespace dlpack = accgraph::dlpack;

TEST_CASE("a plugin that states its DLPack devices gets them") {
  accgraph::load_plugin(DLPACK_STATED_PLUGIN);
  CHECK(accgraph::dlpack_device("test_dlpack_stated", 0, MemoryKind::Device) ==
        DlpackDevice{10, 0});  // kDLROCM
  CHECK(accgraph::dlpack_device("test_dlpack_stated", 0, MemoryKind::Host) ==
        DlpackDevice{11, 0});  // kDLROCMHost
  CHECK(accgraph::dlpack_devices_of(accgraph::backend("test_dlpack_stated")) != nullptr);
}

TEST_CASE("a backend that states none keeps the default: CPU host memory, ExtDev device memory") {
  accgraph::load_plugin(DLPACK_DEFAULT_PLUGIN);
  CHECK(accgraph::dlpack_devices_of(accgraph::backend("test_dlpack_default")) == nullptr);
  CHECK(accgraph::dlpack_device("test_dlpack_default", 0, MemoryKind::Device) ==
        DlpackDevice{dlpack::kDLExtDev, 0});
  CHECK(accgraph::dlpack_device("test_dlpack_default", 0, MemoryKind::Host) ==
        DlpackDevice{dlpack::kDLCPU, 0});
  CHECK(accgraph::default_dlpack_device(3, MemoryKind::Device) ==
        DlpackDevice{dlpack::kDLExtDev, 3});
}

TEST_CASE("the host backend's memory is CPU memory, of both kinds") {
  CHECK(accgraph::dlpack_device("host", 0, MemoryKind::Device) == DlpackDevice{dlpack::kDLCPU, 0});
  CHECK(accgraph::dlpack_device("host", 0, MemoryKind::Host) == DlpackDevice{dlpack::kDLCPU, 0});
}

TEST_CASE("the CPU addresses CPU, pinned and managed memory only") {
  CHECK(dlpack::host_addressable(dlpack::kDLCPU));
  CHECK(dlpack::host_addressable(dlpack::kDLCUDAHost));
  CHECK(dlpack::host_addressable(dlpack::kDLCUDAManaged));
  CHECK_FALSE(dlpack::host_addressable(dlpack::kDLCUDA));
  CHECK_FALSE(dlpack::host_addressable(dlpack::kDLExtDev));
  CHECK_FALSE(dlpack::host_addressable(dlpack::kDLVulkan));
}

TEST_CASE("an unknown backend is the registry's error") {
  accgraph::testing::require_error(
      [] { accgraph::dlpack_device("no_such_backend", 0, MemoryKind::Device); },
      accgraph::ErrorCode::InvalidArgument, {"unknown backend 'no_such_backend'"});
}
