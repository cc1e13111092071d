// The error checks every accgraph test uses: an accgraph::Error with the expected code and
// message, or a failed check saying what was thrown instead (nothing, or another code).
#pragma once

#include <initializer_list>
#include <string>

#include <doctest/doctest.h>

#include "accgraph/error.hpp"

/// Checks that `expr` throws accgraph::Error with `code` and a message containing `text`.
#define CHECK_ACCGRAPH_ERROR(expr, expected_code, text)                                         \
  do {                                                                                          \
    bool accgraph_thrown_ = false;                                                              \
    try {                                                                                       \
      expr;                                                                                     \
    } catch (const ::accgraph::Error& accgraph_error_) {                                        \
      accgraph_thrown_ = true;                                                                  \
      CHECK_MESSAGE(accgraph_error_.code() == (expected_code),                                  \
                    std::string(accgraph_error_.what()));                                       \
      CHECK_MESSAGE(std::string(accgraph_error_.what()).find(text) != std::string::npos,        \
                    "expected '" << (text) << "' in: " << std::string(accgraph_error_.what())); \
    }                                                                                           \
    CHECK_MESSAGE(accgraph_thrown_, "expected an accgraph::Error from: " #expr);                \
  } while (false)

namespace accgraph::testing {

/// Runs `fn` and requires an accgraph::Error with `code` whose what() contains every fragment.
template <class Fn>
void require_error(Fn&& fn, ErrorCode code, std::initializer_list<std::string> fragments) {
  try {
    fn();
    FAIL("expected an accgraph::Error");
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, std::string(e.what()));
    for (const std::string& fragment : fragments)
      CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos,
                    "missing '" << fragment << "' in: " << std::string(e.what()));
  }
}

/// The same, and the error's reason (ErrorReason, Note [Error reasons] in core/error.cpp).
template <class Fn>
void require_error(Fn&& fn, ErrorCode code, ErrorReason reason,
                   std::initializer_list<std::string> fragments) {
  try {
    fn();
    FAIL("expected an accgraph::Error");
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, std::string(e.what()));
    CHECK_MESSAGE(e.reason() == reason, "reason '" << to_string(e.reason()) << "', expected '"
                                                   << to_string(reason)
                                                   << "': " << std::string(e.what()));
    for (const std::string& fragment : fragments)
      CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos,
                    "missing '" << fragment << "' in: " << std::string(e.what()));
  }
}

}  // namespace accgraph::testing
