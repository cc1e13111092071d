// The core against a backend that breaks rule fork-join.leave (mutant 12: a forked queue stays
// in capture mode after the capture ended): no stream may keep the address of a graph that
// ended its capture or was destroyed (audit 2026-11-25, issue 18 item 8: the installed
// conformance suite crashed on this plugin in 3 of about 14 runs instead of failing the case).
#include <memory>

#include <doctest/doctest.h>

#include "accgraph/accgraph.hpp"

using namespace accgraph;

TEST_CASE("fork-join.leave broken by the backend: capturing_graph() never dangles") {
  load_plugin(FORK_JOIN_LEAVE_MUTANT);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    // New streams each round: the broken backend leaves `forked` in its old capture.
    Stream origin = Stream::create("toy_mutant");
    Stream forked = Stream::create("toy_mutant");
    Buffer buffer = Buffer::allocate(origin, 64);
    auto graph = std::make_unique<AcceleratorGraph>("toy_mutant");
    graph->capture_begin(origin);
    forked.wait(origin);  // fork: `forked` joins the capture
    CHECK(forked.capturing_graph() == graph.get());
    forked.fill(buffer, 1);
    origin.wait(forked);  // join
    if (round == 0) {
      graph->capture_end();
    } else {
      graph->reset();  // abandon the capture
    }
    // The broken backend may still say the forked queue captures; the core's link is gone.
    CHECK(forked.capturing_graph() == nullptr);
    graph.reset();  // the graph is destroyed: the link must not point at freed memory
    CHECK(forked.capturing_graph() == nullptr);
  }
}
