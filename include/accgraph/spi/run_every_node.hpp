// SPI helper for backends: a replay that runs every node even after one failed and reports the
// first failure (Note [Replays run every node]).
#pragma once

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "accgraph/spi/first_failure.hpp"

namespace accgraph {

/// Note [Replays run every node]: a replay runs every node of the graph even after one failed,
/// so that a marker set's end_sequence still publishes completion (a profiler waiting for the
/// replay would hang otherwise), and reports the first failure, as one OperationFailure naming
/// the node: "<name_of(i)> (node <i> of a <replay>)". `run(i)` runs node i.
template <class Run, class NameOf>
void run_every_node(size_t count, Run&& run, NameOf&& name_of, std::string_view replay) {
  // A temporary functor that is trivially copyable (a lambda capturing pointers) is run from a
  // local copy: through the reference its captures were loaded again after every node's call,
  // which may write anywhere. A caller that passed it as an rvalue has given it up.
  using Functor = std::remove_reference_t<Run>;
  constexpr bool kCopy = std::is_trivially_copyable_v<Functor> && !std::is_lvalue_reference_v<Run>;
  std::conditional_t<kCopy, Functor, Run&&> runner = std::forward<Run>(run);
  std::optional<OperationFailure> first;
  for (size_t i = 0; i < count; ++i) {
    try {
      runner(i);
    } catch (...) {
      if (first) continue;
      std::string what = "an exception that is not a std::exception";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      first.emplace(std::string(name_of(i)) + " (node " + std::to_string(i) + " of a " +
                        std::string(replay) + ")",
                    what);
    }
  }
  if (first) throw *first;
}

}  // namespace accgraph
