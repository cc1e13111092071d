// What the trace exporters share (write_chrome_trace in exporters.cpp, write_perfetto_trace in
// perfetto/writer.cpp): text made valid UTF-8, the error handling around an export, and the
// first-fit assignment of overlapping regions to overflow tracks. Internal; header-only so that
// accgraph::perfetto, a library of its own, compiles the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ios>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "accgraph/error.hpp"

namespace accgraph::timing::detail {

// Note [Exported text]: names, paths, metadata, backend and device names come from the caller
// and may hold any bytes. Every exporter writes them as valid UTF-8: a byte that does not
// belong to a well-formed UTF-8 sequence (a stray continuation byte, a truncated sequence, an
// overlong form, a surrogate, a code point above U+10FFFF) becomes U+FFFD, one per byte, so
// valid text round-trips exactly. On top of that, each format escapes what it must: JSON
// escapes control characters, CSV quotes fields per RFC 4180, the text table shows control
// characters as \xNN (\u00NN for C1 controls) so every row stays one line and no terminal
// escape sequence gets through.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at the start of `text`, or 0 if there is none.
inline size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return length;
}

// `text` as valid UTF-8 (Note [Exported text]).
inline std::string valid_utf8(std::string_view text) {
  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text.substr(i));
    if (length == 0) {
      result += kReplacement;
      ++i;
    } else {
      result.append(text, i, length);
      i += length;
    }
  }
  return result;
}

// True when `a` and `b` are the same text once made valid UTF-8 (Note [Exported text]).
inline bool same_valid_utf8(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const size_t la = utf8_sequence_length(a.substr(i)), lb = utf8_sequence_length(b.substr(j));
    if ((la == 0 ? kReplacement : a.substr(i, la)) != (lb == 0 ? kReplacement : b.substr(j, lb)))
      return false;
    i += la == 0 ? 1 : la;
    j += lb == 0 ? 1 : lb;
  }
  return i == a.size() && j == b.size();
}

[[noreturn]] inline void throw_write_failed(const char* what, const std::ostream& out) {
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("writing {} failed: the output stream reported an error ({}{}): the "
                          "destination did not take the data (a full disk, a closed pipe) or "
                          "the stream had failed before the call; check the destination and "
                          "write again",
                          what, out.bad() ? "badbit" : "failbit", out.eof() ? ", eofbit" : ""));
}

// Runs an exporter: flushes `out`, throws Error when the stream failed, and turns any other
// exception into an Error too, so callers see one exception family.
template <class Write>
void export_to(std::ostream& out, const char* what, Write&& write) {
  try {
    write();
    out.flush();
  } catch (const Error&) {
    throw;
  } catch (const std::ios_base::failure&) {  // a stream with exceptions() enabled
    throw_write_failed(what, out);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} ran out of memory: export fewer reports at a time", what));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("writing {} failed unexpectedly: {}; this is a bug in accgraph: "
                            "please report it with the names and metadata of the exported "
                            "regions",
                            what, e.what()));
  }
  if (!out) throw_write_failed(what, out);
}

// Chrome/Perfetto draw the events of one track as a call stack, so on every track each event
// must either contain or follow the ones before it. Regions of one track can overlap without
// nesting (a region that ends on a stream other than where it began its sibling, two replays of
// different graphs overlapping on one stream id, two streams' regions in one lane): those move
// to overflow tracks ("lanes" here: Chrome's "(overlap <k>)" threads, Perfetto's backing tracks).
// Greedy first fit over events sorted by start (longer first on ties, so parents precede
// children): a lane keeps the stack of its events still open; an event fits a lane when,
// after popping what ended before it starts, it lies inside the innermost open one.
struct Span {
  uint64_t start_ns, end_ns;
};

class LaneAssigner {
 public:
  // Forgets the lanes of the previous stream.
  void start_stream() {
    for (auto& open : lanes_) open.clear();
    used_ = 0;
  }
  // The lane of `r`, the next region of the stream in sorted order; `parent_lane` is the lane
  // of its enclosing region on the same stream, or -1 (none, or not assigned yet).
  int assign(const Span& r, int parent_lane) {
    size_t lane = 0;
    // A region stays on its parent's track when it fits there (sorting puts parents first).
    if (parent_lane >= 0 && fits(static_cast<size_t>(parent_lane), r)) {
      lane = static_cast<size_t>(parent_lane);
    } else {
      while (lane < used_ && !fits(lane, r)) ++lane;
    }
    if (lane == used_) {
      if (used_ == lanes_.size()) lanes_.emplace_back();
      ++used_;
    }
    lanes_[lane].push_back(r.end_ns);
    return static_cast<int>(lane);
  }
  // The number of lanes the stream used.
  int used() const { return static_cast<int>(used_); }

 private:
  bool fits(size_t lane, const Span& r) {
    auto& open = lanes_[lane];
    // Sorted by start, an open event that ended by the time this one starts (and does not
    // contain it as a zero-length event at its end) can contain no later event either.
    while (!open.empty() && open.back() <= r.start_ns && r.end_ns > open.back()) open.pop_back();
    return open.empty() || r.end_ns <= open.back();
  }

  std::vector<std::vector<uint64_t>> lanes_;  // end times of the open events per lane (reused)
  size_t used_ = 0;
};

}  // namespace accgraph::timing::detail
