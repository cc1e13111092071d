// Captures, times and replays a graph on the host backend through the installed package, and
// checks that the replays (not the capture) changed the data.
#include <accgraph/accgraph.hpp>

#include <cstdio>
#include <cstring>

int main() {
  accgraph::Stream stream = accgraph::Stream::create("host");
  accgraph::Buffer device = accgraph::Buffer::allocate(stream, 4096);
  accgraph::Buffer host = accgraph::Buffer::allocate(stream, 4096, accgraph::MemoryKind::Host);
  std::memset(host.data(), 0, host.size());

  accgraph::timing::Profiler profiler;
  accgraph::AcceleratorGraph graph("host");
  profiler.attach(graph);
  graph.capture_begin(stream);
  {
    auto region = profiler.region(stream, "fill_and_copy");
    stream.fill(device, 0x5a);
    stream.copy(host, device);
  }
  graph.capture_end();
  stream.synchronize();
  if (host.as<unsigned char>()[0] != 0) {
    std::fprintf(stderr, "package consumer: the capture ran the work instead of recording it\n");
    return 1;
  }
  for (int i = 0; i < 3; ++i) graph.replay();
  profiler.flush();
  stream.synchronize();
  if (host.as<unsigned char>()[4095] != 0x5a || profiler.delivered() != 3) {
    std::fprintf(stderr, "package consumer: replays did not run (byte %d, %llu reports)\n",
                 host.as<unsigned char>()[4095],
                 static_cast<unsigned long long>(profiler.delivered()));
    return 1;
  }
  accgraph::Version v = accgraph::library_version();
  std::printf("package consumer: accgraph %d.%d.%d, 3 replays, 3 reports: ok\n", v.major, v.minor,
              v.patch);
  return 0;
}
