// choose_capture_path: native graphs when a flavour of the extension is usable, else command
// lists, with the reason in words.
#include "level_zero_capture_path.hpp"

#include <fmt/format.h>

namespace accgraph::detail::level_zero {

const char* to_string(CapturePath path) noexcept {
  return path == CapturePath::NativeGraph ? "native graphs" : "regular command lists";
}

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// Why `flavor` cannot be used, or empty when it can.
std::string flavor_problem(const char* name, bool advertised, uint32_t flags,
                           const std::vector<std::string>& missing) {
  if (!advertised) return fmt::format("{} is not advertised", name);
  if ((flags & kGraphFlagImmutable) == 0)
    return fmt::format(
        "{} is advertised but the device does not report the immutable-graph "
        "capability (graphFlags {:#x})",
        name, flags);
  if (!missing.empty())
    return fmt::format("{} is advertised but the driver resolved no address for {}", name,
                       join(missing));
  return {};
}

// The native-graph path with `flavor`; the reason is the extension's name.
PathChoice native_graphs(GraphFlavor flavor) {
  return PathChoice{CapturePath::NativeGraph, flavor, to_string(flavor)};
}

}  // namespace

PathChoice choose_capture_path(const GraphSupport& support) {
  PathChoice choice;
  if (support.forced_command_list) {
    choice.reason = "ACCGRAPH_LEVEL_ZERO_CAPTURE=command_list";
    return choice;
  }
  const std::string ext =
      flavor_problem(kGraphExtName, support.ext_advertised, support.ext_flags, support.ext_missing);
  if (ext.empty()) return native_graphs(GraphFlavor::Ext);
  const std::string exp =
      flavor_problem(kGraphExpName, support.exp_advertised, support.exp_flags, support.exp_missing);
  if (exp.empty()) return native_graphs(GraphFlavor::Exp);
  if (!support.ext_advertised && !support.exp_advertised)
    choice.reason = "the driver advertises no record-and-replay graph extension";
  else
    choice.reason = fmt::format("{}; {}", ext, exp);
  return choice;
}

}  // namespace accgraph::detail::level_zero
