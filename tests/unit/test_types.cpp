// Tests of types.hpp and version.hpp: capture modes, pool ids, capabilities, the version.
#include <doctest/doctest.h>

#include <string>

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

TEST_CASE("the library version matches the headers") {
  accgraph::Version v = accgraph::library_version();
  CHECK(v.major == ACCGRAPH_VERSION_MAJOR);
  CHECK(v.minor == ACCGRAPH_VERSION_MINOR);
  CHECK(v.patch == ACCGRAPH_VERSION_PATCH);
}
