// Tests of types.hpp and version.hpp: capture modes, pool ids, capabilities, the version.
#include <doctest/doctest.h>

#include <string>

#include <fmt/format.h>

#include "accgraph/graph.hpp"
#include "accgraph/types.hpp"
#include "accgraph/version.hpp"

using accgraph::Capabilities;
using accgraph::CaptureMode;
using accgraph::PoolId;

TEST_CASE("PoolId {0,0} asks for a new private pool and compares by value") {
  PoolId fresh;
  CHECK(fresh.is_new_private());
  PoolId a{1, 7}, b{1, 7}, c{1, 8};
  CHECK_FALSE(a.is_new_private());
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("Capabilities::supports honours the listed modes and always Default") {
  Capabilities caps;
  CHECK(caps.supports(CaptureMode::Default));
  CHECK_FALSE(caps.supports(CaptureMode::Global));
  caps.capture_modes = {CaptureMode::Global, CaptureMode::Relaxed};
  CHECK(caps.supports(CaptureMode::Global));
  CHECK(caps.supports(CaptureMode::Relaxed));
  CHECK_FALSE(caps.supports(CaptureMode::ThreadLocal));
}

TEST_CASE("enumerations have names") {
  CHECK(std::string(to_string(CaptureMode::ThreadLocal)) == "ThreadLocal");
  CHECK(std::string(to_string(accgraph::MemoryKind::Host)) == "host");
  CHECK(std::string(to_string(accgraph::GraphState::Instantiated)) == "instantiated");
}

// ACCGRAPH_TEST_PROJECT_VERSION is project(accgraph VERSION ...) from CMake
// (tests/unit/CMakeLists.txt): the one place the version is set must agree with the header the
// users compile against and with the library they run against.
TEST_CASE("the headers and the library report the version CMake's project() declares") {
  const std::string project_version = ACCGRAPH_TEST_PROJECT_VERSION;
  const std::string header_version = fmt::format("{}.{}.{}", ACCGRAPH_VERSION_MAJOR,
                                                 ACCGRAPH_VERSION_MINOR, ACCGRAPH_VERSION_PATCH);
  CHECK(header_version == project_version);
  accgraph::Version v = accgraph::library_version();
  CHECK(fmt::format("{}.{}.{}", v.major, v.minor, v.patch) == project_version);
  CHECK(v.major == ACCGRAPH_TEST_PROJECT_VERSION_MAJOR);
  CHECK(v.minor == ACCGRAPH_TEST_PROJECT_VERSION_MINOR);
  CHECK(v.patch == ACCGRAPH_TEST_PROJECT_VERSION_PATCH);
}
