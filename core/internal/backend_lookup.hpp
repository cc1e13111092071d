// The one name-to-backend lookup of the core (core-internal, not installed).
#pragma once

#include <string>
#include <string_view>

namespace accgraph {
class Backend;
}

namespace accgraph::detail {

struct ResolvedBackend {
  Backend* backend = nullptr;
  std::string name;  // the registered name (the default backend's when none was given)
};

/// The registered backend called `name`, or the default backend when `name` is empty; the
/// registry's NotFound error (naming the registered backends) when there is none.
ResolvedBackend resolve_backend(std::string_view name);

}  // namespace accgraph::detail
