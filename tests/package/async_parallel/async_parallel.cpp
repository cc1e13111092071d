// Loads the async example plugin (argv[1]) and checks that a replay runs the two branches of a
// fork/join graph in parallel: the forked graph's replay must take clearly less than a graph
// doing the same two delays one after the other, measured in the same run (no absolute bound).
#include <accgraph/accgraph.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDelay = std::chrono::milliseconds(20);

// The fastest of a few replays, so that one preempted replay on a loaded machine does not count.
double fastest_replay_ms(accgraph::AcceleratorGraph& graph, accgraph::Stream& stream) {
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    graph.replay(stream);
    stream.synchronize();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path of libaccgraph_async.so>\n", argv[0]);
    return 2;
  }
  accgraph::load_plugin(argv[1]);
  accgraph::Stream origin = accgraph::Stream::create("async");
  accgraph::Stream forked = accgraph::Stream::create("async");

  accgraph::AcceleratorGraph serial("async");
  serial.capture_begin(origin);
  origin.delay(kDelay);
  origin.delay(kDelay);
  serial.capture_end();

  accgraph::AcceleratorGraph parallel("async");
  parallel.capture_begin(origin);
  forked.wait(origin);  // fork: the forked stream's work is a branch of its own
  origin.delay(kDelay);
  forked.delay(kDelay);
  origin.wait(forked);  // join
  parallel.capture_end();

  const double serial_ms = fastest_replay_ms(serial, origin);
  const double parallel_ms = fastest_replay_ms(parallel, origin);
  std::printf(
      "async parallel replay: two %lld ms branches took %.1f ms; the same delays in one "
      "branch took %.1f ms\n",
      static_cast<long long>(kDelay.count()), parallel_ms, serial_ms);
  if (parallel_ms > 0.8 * serial_ms) {
    std::fprintf(stderr,
                 "async parallel replay: the branches did not overlap (%.1f ms is more "
                 "than 80%% of the serial %.1f ms)\n",
                 parallel_ms, serial_ms);
    return 1;
  }
  return 0;
}
