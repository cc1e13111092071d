// Tests of Stream::delay's documented range (stream.hpp: 0 to 24 hours) on the host backend
// (audit 2.25: nanoseconds::max() overflowed the host deadline and returned early).
#include <chrono>

#include <doctest/doctest.h>

#include "timing_seam.hpp"
#include "accgraph/accgraph.hpp"
#include "check_error.hpp"

using namespace accgraph;
using namespace std::chrono_literals;

// Inside a capture, so that nothing runs even where a delay is wrongly accepted: the graph is
// dropped before capture_end.
TEST_CASE("delay: above 24 hours is an InvalidArgument naming the maximum") {
  Stream stream = Stream::create("host");
  AcceleratorGraph graph("host");
  graph.capture_begin(stream);
  CHECK_ACCGRAPH_ERROR(stream.delay(std::chrono::nanoseconds::max()), ErrorCode::InvalidArgument,
                       "delay of 9223372036854775807 ns is longer than the maximum of 24 hours "
                       "(86400000000000 ns): enqueue several shorter delays");
  CHECK_ACCGRAPH_ERROR(stream.delay(24h + 1ns), ErrorCode::InvalidArgument,
                       "longer than the maximum of 24 hours");
  CHECK(detail::StreamAccess::operation_count(stream) == 0);  // nothing was enqueued
}

TEST_CASE("delay: exactly 24 hours is accepted") {
  Stream stream = Stream::create("host");
  {
    AcceleratorGraph graph("host");
    graph.capture_begin(stream);
    stream.delay(24h);
    CHECK(detail::StreamAccess::operation_count(stream) == 1);
  }
  CHECK_FALSE(stream.is_capturing());
}

TEST_CASE("delay: 20 ms on the host lasts at least 20 ms") {
  Stream stream = Stream::create("host");
  const auto start = std::chrono::steady_clock::now();
  stream.delay(20ms);
  stream.synchronize();
  CHECK(std::chrono::steady_clock::now() - start >= 20ms);
}
