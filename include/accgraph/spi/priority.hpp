// Backend priorities: the default backend is the available one of highest priority. A plugin
// states its priority in its entry table (ACCGRAPH_DEFINE_PLUGIN, accgraph/spi/plugin.hpp); an
// application registering a backend itself passes one to Registry::register_backend.
#pragma once

namespace accgraph::priority {

constexpr int fallback = 0;     ///< host: used only when nothing else is available
constexpr int normal = 50;      ///< level_zero, and what most plugins use
constexpr int preferred = 100;  ///< cuda

}  // namespace accgraph::priority
