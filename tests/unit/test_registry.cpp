// Tests of registry.hpp and the plugin loader: built-ins, unknown names, duplicates, and every
// way a plugin library is rejected (each with its exact code and message).
#include <doctest/doctest.h>

#include <string>

#include "accgraph/accgraph.hpp"
#include "check_error.hpp"

using accgraph::Error;
using accgraph::ErrorCode;
using accgraph::Registry;

using accgraph::testing::require_error;

TEST_CASE("the built-in list registers host, cuda and level_zero") {
  Registry& registry = Registry::instance();
  CHECK(registry.contains("host"));
  CHECK(registry.contains("cuda"));
  CHECK(registry.contains("level_zero"));
  CHECK(registry.backend("host").name() == "host");
  // host is always available and is the lowest priority, so it is listed last among built-ins.
  auto names = registry.names();
  REQUIRE(!names.empty());
  bool host_available = false;
  for (const auto& status : registry.status())
    if (status.name == "host") host_available = status.available && !status.devices.empty();
  CHECK(host_available);
}

TEST_CASE("an unknown backend name lists what is registered") {
  require_error([] { Registry::instance().backend("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'", "registered backends are:", "host (priority 0",
                 "cuda", "level_zero"});
  require_error([] { accgraph::AcceleratorGraph graph("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'"});
}

TEST_CASE("registering a name twice is an error, not an exit") {
  require_error(
      [] {
        Registry::instance().register_backend(
            "host", accgraph::priority::normal, [] { return std::unique_ptr<accgraph::Backend>(); },
            "a test");
      },
      ErrorCode::InvalidArgument, {"backend 'host' is already registered (built-in)", "a test"});
  require_error(
      [] { Registry::instance().register_backend("x_empty_factory", 1, {}, "a test"); },
      ErrorCode::InvalidArgument, {"empty factory"});
}

TEST_CASE("a backend whose factory fails is listed unavailable with the reason") {
  Registry& registry = Registry::instance();
  registry.register_backend(
      "test_factory_fails", accgraph::priority::normal,
      []() -> std::unique_ptr<accgraph::Backend> {
        throw Error(ErrorCode::Unavailable, "no device: the test says so");
      },
      "a test");
  require_error([&] { registry.backend("test_factory_fails"); }, ErrorCode::Unavailable,
                {"backend 'test_factory_fails' is unavailable: no device: the test says so"});
  bool listed = false;
  for (const auto& status : registry.status())
    if (status.name == "test_factory_fails") {
      listed = true;
      CHECK_FALSE(status.available);
      CHECK(status.unavailable_reason == "no device: the test says so");
    }
  CHECK(listed);
}

TEST_CASE("a well-formed plugin that cannot run is registered as unavailable") {
  Registry& registry = Registry::instance();
  accgraph::load_plugin(UNAVAILABLE_PLUGIN);
  CHECK(registry.contains("test_unavailable"));
  require_error([&] { registry.backend("test_unavailable"); }, ErrorCode::Unavailable,
                {"no toy device is attached to this machine"});
  // A second load of the same file is a duplicate name.
  require_error([] { accgraph::load_plugin(UNAVAILABLE_PLUGIN); }, ErrorCode::PluginError,
                {UNAVAILABLE_PLUGIN, "backend 'test_unavailable', which is already registered"});
}

TEST_CASE("malformed plugins are rejected with the file and the reason") {
  struct Case {
    const char* path;
    const char* reason;
  };
  const Case cases[] = {
      {BAD_ABI_MAJOR_PLUGIN, "built for plugin ABI 2.0 but this accgraph"},
      {BAD_ABI_MAJOR_PLUGIN, "the major versions must match"},
      {SMALL_TABLE_PLUGIN, "smaller than the"},
      {BAD_NAME_PLUGIN, "'Not A Name!' is not a valid name"},
      {DUPLICATE_PLUGIN, "registers backend 'host', which is already registered (built-in)"},
      {NO_ENTRY_PLUGIN, "it has no entry point 'accgraph_plugin_entry'"},
      {NOT_A_LIBRARY_PLUGIN, "it could not be loaded as a shared library"},
      {PLUGIN_DIRECTORY "/does_not_exist.so", "the file does not exist"},
      {PLUGIN_DIRECTORY, "it is not a regular file"},
  };
  size_t failures_before = Registry::instance().plugin_failures().size();
  for (const Case& c : cases) {
    CAPTURE(c.path);
    require_error([&] { accgraph::load_plugin(c.path); }, ErrorCode::PluginError,
                  {std::string("plugin '") + c.path + "' was rejected", c.reason});
  }
  // Each rejection is remembered for `accgraph backends`, and the registry still works.
  CHECK(Registry::instance().plugin_failures().size() ==
        failures_before + sizeof(cases) / sizeof(cases[0]));
  CHECK_FALSE(Registry::instance().contains("test_table"));
  CHECK(Registry::instance().backend("host").name() == "host");
}

TEST_CASE("create_graph_impl builds a graph of the named backend") {
  auto impl = accgraph::create_graph_impl("host", accgraph::GraphArgs{});
  REQUIRE(impl != nullptr);
  require_error([] { accgraph::create_graph_impl("nosuch"); }, ErrorCode::InvalidArgument,
                {"unknown backend 'nosuch'"});
}
