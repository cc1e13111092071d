// A backend under another name over the host backend's objects, for tests of what the core does
// with a backend: its streams are host streams whose backend name differs (the core's "stream of
// another backend" checks), a subclass can change capabilities(), and it implements no optional
// SPI interface (no ClockSampling).
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "accgraph/accgraph.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/priority.hpp"

namespace accgraph::test {

class HostAliasBackend : public Backend {
 public:
  explicit HostAliasBackend(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<DeviceInfo> devices() const override { return host().devices(); }
  Capabilities capabilities(int device) const override { return host().capabilities(device); }
  std::unique_ptr<StreamImpl> create_stream(int device) override {
    return host().create_stream(device);
  }
  std::unique_ptr<StreamImpl> wrap_stream(int device, void* native) override {
    return host().wrap_stream(device, native);
  }
  std::unique_ptr<BufferImpl> allocate(int device, size_t bytes, MemoryKind kind) override {
    return host().allocate(device, bytes, kind);
  }
  std::unique_ptr<GraphImplInterface> create_graph(const GraphArgs& args) override {
    return host().create_graph(args);
  }
  std::unique_ptr<TimestampMarkers> create_markers(int device,
                                                   const MarkerOptions& options) override {
    return host().create_markers(device, options);
  }

 protected:
  static Backend& host() { return Registry::instance().backend("host"); }

 private:
  std::string name_;
};

/// Registers backend `name` (priority below every built-in, so never the default), made as
/// Alias(name), once per process; later calls for the same name do nothing.
template <class Alias = HostAliasBackend>
void register_host_alias(const std::string& name, const char* origin) {
  static std::mutex mutex;
  static std::set<std::string> registered;
  std::lock_guard<std::mutex> lock(mutex);
  if (!registered.insert(name).second) return;
  Registry::instance().register_backend(
      name, priority::fallback - 1, [name] { return std::make_unique<Alias>(name); }, origin);
}

}  // namespace accgraph::test
