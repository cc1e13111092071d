// A plugin author's and an application's code from accgraph 0.1, which include only the old
// header paths: it must compile silently and link against 0.2 (Note [Forwarding headers] in
// accgraph/backend.hpp), and its checks of what the old headers provided must pass. It opts in to
// report.hpp's statistics and exporters, as such code does until 0.3.
#define ACCGRAPH_DEPRECATED_HEAVY_REPORT
#include <accgraph/plugin.h>
#include <accgraph/backend.hpp>
#include <accgraph/backend_support.hpp>
#include <accgraph/native_call.hpp>
#include <accgraph/plugin.hpp>
#include <accgraph/pool_table.hpp>
#include <accgraph/priority.hpp>
#include <accgraph/report.hpp>  // also the statistics and exporters (opted in above), until 0.3
#include <accgraph/steady_clock_markers.hpp>
#include <accgraph/worker_queue.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "old include paths: %s failed\n", what);
    ++failures;
  }
}

// A native API's result type, described once (native_call.hpp).
struct OldCall {
  using Result = int;
  static constexpr const char* kBackend = "old";
  static bool succeeded(int result) noexcept { return result == 0; }
  static std::string name(int result) { return "OLD_ERROR_" + std::to_string(result); }
  static std::string meaning(int) { return {}; }
  static std::string hint(int) { return {}; }
  static accgraph::ErrorCode error_code(int) noexcept { return accgraph::ErrorCode::BackendError; }
  static void on_failure(int) noexcept {}
};

struct OldPool {
  accgraph::PoolId id;
};

// A backend written against backend.hpp and backend_support.hpp: every type of the SPI and its
// helpers is named, as a 0.1 plugin would.
class OldBackend final : public accgraph::Backend, public accgraph::ClockSampling {
 public:
  std::string name() const override { return "old"; }
  std::vector<accgraph::DeviceInfo> devices() const override { return {}; }
  accgraph::Capabilities capabilities(int device) const override {
    accgraph::check_device_index(device, 1, "old", "capabilities");
    return {};
  }
  std::unique_ptr<accgraph::StreamImpl> create_stream(int) override { return nullptr; }
  std::unique_ptr<accgraph::StreamImpl> wrap_stream(int, void*) override { return nullptr; }
  std::unique_ptr<accgraph::BufferImpl> allocate(int, size_t bytes,
                                                 accgraph::MemoryKind kind) override {
    return std::make_unique<accgraph::HostMemoryBuffer>(bytes, kind, "old");
  }
  std::unique_ptr<accgraph::GraphImplInterface> create_graph(const accgraph::GraphArgs&) override {
    return nullptr;
  }
  std::unique_ptr<accgraph::TimestampMarkers> create_markers(
      int, const accgraph::MarkerOptions& options) override {
    return std::make_unique<accgraph::SteadyClockMarkers>(
        "old", options.resolve_strategy({"steady_clock"}, "old"),
        options.resolve_ring_depth(4, 64, "old"),
        [](accgraph::StreamImpl&, const char*, std::function<void()> op) { op(); });
  }
  void sample_clock(int, accgraph::timing::ClockSample* samples, size_t count) override {
    accgraph::sample_steady_clock(samples, count);
  }

  accgraph::PoolTable<OldPool> pools{"old"};
  accgraph::HandleTable<int> handles{"old"};
  accgraph::FirstFailure failures;
  accgraph::Ownership ownership = accgraph::Ownership::Owned;
};

}  // namespace

ACCGRAPH_DEFINE_PLUGIN("old", accgraph::priority::normal, "0.1", std::make_unique<OldBackend>())

int main() {
  // plugin.h and plugin.hpp: the entry table the macro made creates the backend.
  const AccgraphPluginApi* api = accgraph_plugin_entry();
  check(api->abi_major == ACCGRAPH_PLUGIN_ABI_MAJOR, "the plugin table's ABI major");
  void* created = nullptr;
  char message[256] = {};
  check(api->create_backend(&created, message, sizeof(message)) == ACCGRAPH_STATUS_OK,
        "create_backend through the table");
  auto* backend = static_cast<accgraph::Backend*>(created);
  check(accgraph::clock_sampling(*backend) != nullptr, "clock_sampling");
  std::unique_ptr<accgraph::BufferImpl> buffer =
      backend->allocate(0, 64, accgraph::MemoryKind::Host);
  check(buffer->size() == 64, "HostMemoryBuffer");
  check(backend->create_markers(0, {})->strategy() == "steady_clock", "SteadyClockMarkers");
  api->destroy_backend(created);

  // The helpers of backend_support.hpp and worker_queue.hpp.
  accgraph::WorkerQueue queue{"old"};
  int ran = 0;
  queue.push("count", [&] { ++ran; });
  queue.synchronize();
  check(ran == 1, "WorkerQueue");
  accgraph::delay_on_this_thread(std::chrono::microseconds(1));
  bool threw = false;
  try {
    accgraph::run_every_node(
        2,
        [](size_t i) {
          if (i == 1) throw std::runtime_error("node");
        },
        [](size_t) { return "op"; }, "replay");
  } catch (const accgraph::OperationFailure&) {
    threw = true;
  }
  check(threw, "run_every_node");
  check(accgraph::describe_queue("old", nullptr).rfind("old stream ", 0) == 0, "describe_queue");
  threw = false;
  try {
    ACCGRAPH_NATIVE_CHECK(OldCall, 3, "checking");
  } catch (const accgraph::Error& e) {
    threw = e.message().find("OLD_ERROR_3") != std::string::npos;
  }
  check(threw, "ACCGRAPH_NATIVE_CHECK");

  // What plugin.hpp held besides the macro: the library check and message escaping.
  check(accgraph::plugin::escape_for_message("a\nb") == "a\\nb", "escape_for_message");
  check(accgraph::plugin::shared_library_problem("/nonexistent/libold.so").has_value(),
        "shared_library_problem");
  check(accgraph::plugin::shared_library_image_problem(nullptr, 0).has_value(),
        "shared_library_image_problem");

  // backend.hpp brought in clock.hpp; report.hpp the statistics and exporters (opted in).
  check(accgraph::timing::estimate_clock_offset({{1, 2, 3}}, 1).uncertainty_ns >= 1,
        "estimate_clock_offset");
  accgraph::timing::RegionSample sample;
  sample.info.name = "region";
  sample.start_ns = 100;
  sample.end_ns = 250;
  accgraph::timing::ReplayReport report = accgraph::timing::ReplayReport::from_samples(
      {"old", 0, "cpu", "steady_clock", 1}, 1, 0, {sample});
  accgraph::timing::StatsAccumulator stats(accgraph::timing::StatsMode::Exact);
  stats.add(report);
  check(stats.stats().size() == 1 && stats.stats()[0].max_ns == 150, "StatsAccumulator");
  std::ostringstream trace;
  accgraph::timing::write_chrome_trace(trace, {report});
  check(trace.str().find("\"region\"") != std::string::npos, "write_chrome_trace");
  check(!accgraph::timing::is_perfetto_trace_path("trace.json"), "is_perfetto_trace_path");

  if (failures == 0) std::printf("old include paths: ok\n");
  return failures == 0 ? 0 : 1;
}
