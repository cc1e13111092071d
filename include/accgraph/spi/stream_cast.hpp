// SPI helper for backends: the checked cast from a StreamImpl to the backend's own stream class.
#pragma once

#include <string>
#include <string_view>

#include "accgraph/error.hpp"
#include "accgraph/spi/backend.hpp"

namespace accgraph {

/// The stream of backend `backend` behind `stream` (a `Stream` of another backend is a caller's
/// mistake), or Error(InvalidArgument) naming `operation` and what to pass instead:
///
///   MyStream& s = accgraph::stream_cast<MyStream>(stream_impl, "mybackend", "replay");
template <class BackendStream>
BackendStream& stream_cast(StreamImpl& stream, std::string_view backend, const char* operation) {
  if (auto* cast = dynamic_cast<BackendStream*>(&stream)) return *cast;
  const std::string name(backend);
  throw Error(ErrorCode::InvalidArgument,
              std::string(operation) + ": the stream does not belong to the " + name +
                  " backend: pass a stream from Stream::create(\"" + name + "\")",
              name);
}

}  // namespace accgraph
