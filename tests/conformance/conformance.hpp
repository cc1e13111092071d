// The conformance harness: cases written once and run per backend, capability-gated skips, and
// helpers shared by the case files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "accgraph/accgraph.hpp"
#include "check_error.hpp"

namespace accgraph::conformance {

using CaseFunction = void (*)();

/// Adds a case to the list registered with doctest once per backend (in main). Returns true so
/// it can initialise a static.
bool add_case(const char* name, CaseFunction function, const char* file, unsigned line);

/// The backend the running case is for.
const std::string& backend();
/// Its device 0 capabilities.
const Capabilities& capabilities();

/// Records a capability-gated skip (counted in the summary) and prints why.
void skip(const std::string& why);

/// A new stream of the backend under test (device 0).
inline Stream make_stream() { return Stream::create(backend()); }

/// The bytes of `buffer` (any kind), read through a Host buffer after synchronising `stream`.
std::vector<uint8_t> read_back(Stream& stream, const Buffer& buffer);

/// True when every byte of `bytes` equals `value` (doctest prints the first mismatch).
bool all_equal(const std::vector<uint8_t>& bytes, uint8_t value);

}  // namespace accgraph::conformance

#define ACCGRAPH_CONFORMANCE_CAT2(a, b) a##b
#define ACCGRAPH_CONFORMANCE_CAT(a, b) ACCGRAPH_CONFORMANCE_CAT2(a, b)
#define ACCGRAPH_CONFORMANCE_CASE_IMPL(fn, name)                                          \
  static void fn();                                                                        \
  [[maybe_unused]] static const bool ACCGRAPH_CONFORMANCE_CAT(fn, _registered) =           \
      ::accgraph::conformance::add_case(name, &fn, __FILE__, __LINE__);                    \
  static void fn()

/// ACCGRAPH_CONFORMANCE_CASE("replay executes recorded work") { ... backend() ... }
#define ACCGRAPH_CONFORMANCE_CASE(name) \
  ACCGRAPH_CONFORMANCE_CASE_IMPL(ACCGRAPH_CONFORMANCE_CAT(conformance_case_, __LINE__), name)

