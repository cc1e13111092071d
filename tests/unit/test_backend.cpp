// Tests of the helpers accgraph/spi/backend.hpp gives backends: MarkerOptions::resolve_strategy and
// resolve_ring_depth (the standard errors for an unknown strategy and too deep a ring).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "accgraph/spi/backend.hpp"
#include "check_error.hpp"

using accgraph::ErrorCode;
using accgraph::MarkerOptions;

TEST_CASE("resolve_strategy: empty picks the default, a known name is kept") {
  const std::vector<std::string> offered{"fast", "exact"};
  CHECK(MarkerOptions{}.resolve_strategy(offered, "b") == "fast");
  CHECK(MarkerOptions{"exact", 0}.resolve_strategy(offered, "b") == "exact");
  CHECK(MarkerOptions{"fast", 0}.resolve_strategy(offered, "b") == "fast");
}

TEST_CASE("resolve_strategy: an unknown name is Unsupported and lists what is offered") {
  const MarkerOptions slow{"slow", 0};
  const std::vector<std::string> two{"fast", "exact"}, three{"a", "b", "c"}, one{"only"}, none;
  CHECK_ACCGRAPH_ERROR(slow.resolve_strategy(two, "b"), ErrorCode::Unsupported,
                       "create_markers: unknown marker strategy 'slow': the b backend offers "
                       "'fast' (default) and 'exact'");
  CHECK_ACCGRAPH_ERROR(slow.resolve_strategy(three, "x"), ErrorCode::Unsupported,
                       "offers 'a' (default), 'b' and 'c'");
  CHECK_ACCGRAPH_ERROR(slow.resolve_strategy(one, "x"), ErrorCode::Unsupported,
                       "the x backend offers 'only'");
  CHECK_ACCGRAPH_ERROR(MarkerOptions().resolve_strategy(none, "x"), ErrorCode::Unsupported,
                       "the x backend offers none");
  try {
    slow.resolve_strategy(one, "mybackend");
    FAIL("an unknown strategy was accepted");
  } catch (const accgraph::Error& e) {
    CHECK(e.backend() == "mybackend");
  }
}

TEST_CASE("resolve_ring_depth: 0 is the default, up to the maximum is kept, above is an error") {
  CHECK(MarkerOptions{}.resolve_ring_depth(16, 1024, "b") == 16);
  CHECK(MarkerOptions{"", 1}.resolve_ring_depth(16, 1024, "b") == 1);
  CHECK(MarkerOptions{"", 1024}.resolve_ring_depth(16, 1024, "b") == 1024);
  const MarkerOptions too_deep{"", 1025};
  CHECK_ACCGRAPH_ERROR(too_deep.resolve_ring_depth(16, 1024, "b"), ErrorCode::InvalidArgument,
                       "create_markers: ring depth 1025 is larger than the b backend's maximum "
                       "of 1024: ask for fewer replays in flight");
  // A default above the maximum is the backend's own bug, reported the same way.
  CHECK_ACCGRAPH_ERROR(MarkerOptions().resolve_ring_depth(2048, 1024, "b"),
                       ErrorCode::InvalidArgument, "ring depth 2048");
}
