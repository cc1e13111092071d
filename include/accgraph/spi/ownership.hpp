// SPI helper for backends: whether an object owns the native handle it holds or borrows it.
#pragma once

namespace accgraph {

/// Whether an object owns the native handle it holds (destroys it with itself) or only borrows
/// it (Backend::wrap_stream: the handle stays its creator's).
///
///   return std::make_unique<MyStream>(queue, accgraph::Ownership::Borrowed);
enum class Ownership { Owned, Borrowed };

}  // namespace accgraph
