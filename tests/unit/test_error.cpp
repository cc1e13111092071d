// Tests of error.hpp: codes, message composition, native call details, the log handler.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "accgraph/error.hpp"

using accgraph::Error;
using accgraph::ErrorCode;

TEST_CASE("an Error carries its code, backend, native call and code") {
  Error e(ErrorCode::BackendError, "the capture was invalidated: capture again", "cuda",
          "cudaStreamEndCapture", "cudaErrorStreamCaptureInvalidated");
  CHECK(e.code() == ErrorCode::BackendError);
  CHECK(e.message() == "the capture was invalidated: capture again");
  CHECK(e.backend() == "cuda");
  CHECK(e.native_call() == "cudaStreamEndCapture");
  CHECK(e.native_code() == "cudaErrorStreamCaptureInvalidated");
  CHECK(std::string(e.what()) ==
        "[backend error] cuda: the capture was invalidated: capture again "
        "(cudaStreamEndCapture returned cudaErrorStreamCaptureInvalidated)");
}

TEST_CASE("a core Error has no backend prefix or native part") {
  Error e(ErrorCode::InvalidState, "replay before capture");
  CHECK(std::string(e.what()) == "[invalid state] replay before capture");
  CHECK(e.backend().empty());
  CHECK(e.native_call().empty());
}

TEST_CASE("an Error carries a reason a caller tells apart, Unspecified by default") {
  using accgraph::ErrorReason;
  CHECK(Error(ErrorCode::InvalidState, "replay before capture").reason() ==
        ErrorReason::Unspecified);
  Error e(ErrorCode::InvalidState, ErrorReason::NativeCapture, "stream 3 captures natively",
          "cuda");
  CHECK(e.reason() == ErrorReason::NativeCapture);
  CHECK(e.code() == ErrorCode::InvalidState);
  CHECK(std::string(e.what()) == "[invalid state] cuda: stream 3 captures natively");
  Error copy = e;  // a copy keeps it (Python's exception is built from a caught reference)
  CHECK(copy.reason() == ErrorReason::NativeCapture);
  CHECK(std::string(to_string(ErrorReason::Unspecified)) == "unspecified");
  CHECK(std::string(to_string(ErrorReason::NativeCapture)) == "native capture");
  CHECK(std::string(to_string(ErrorReason::UnattachedCapture)) == "unattached capture");
  CHECK(std::string(to_string(ErrorReason::CaptureEnded)) == "capture ended");
  CHECK(std::string(to_string(ErrorReason::RegionOrder)) == "region order");
}

TEST_CASE("every code has a name") {
  CHECK(std::string(to_string(ErrorCode::InvalidArgument)) == "invalid argument");
  CHECK(std::string(to_string(ErrorCode::InvalidState)) == "invalid state");
  CHECK(std::string(to_string(ErrorCode::Unavailable)) == "unavailable");
  CHECK(std::string(to_string(ErrorCode::Unsupported)) == "unsupported");
  CHECK(std::string(to_string(ErrorCode::BackendError)) == "backend error");
  CHECK(std::string(to_string(ErrorCode::PluginError)) == "plugin error");
}

TEST_CASE("the log handler receives messages and can be restored") {
  struct Seen {
    std::vector<std::pair<accgraph::LogLevel, std::string>> messages;
  } seen;
  accgraph::set_log_handler(
      [](accgraph::LogLevel level, const char* message, void* user) {
        static_cast<Seen*>(user)->messages.emplace_back(level, message);
      },
      &seen);
  accgraph::log(accgraph::LogLevel::Warning, "destructor could not free a buffer");
  accgraph::set_log_handler(nullptr);
  accgraph::log(accgraph::LogLevel::Debug, "not seen by the test handler");
  REQUIRE(seen.messages.size() == 1);
  CHECK(seen.messages[0].first == accgraph::LogLevel::Warning);
  CHECK(seen.messages[0].second == "destructor could not free a buffer");
}
