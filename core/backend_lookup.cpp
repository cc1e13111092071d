// The core's name-to-backend lookup (core/internal/backend_lookup.hpp).
#include "internal/backend_lookup.hpp"

#include "accgraph/registry.hpp"

namespace accgraph::detail {

ResolvedBackend resolve_backend(std::string_view name) {
  Registry& registry = Registry::instance();
  ResolvedBackend resolved;
  resolved.name = name.empty() ? registry.default_backend_name() : std::string(name);
  resolved.backend = &registry.backend(resolved.name);
  return resolved;
}

}  // namespace accgraph::detail
