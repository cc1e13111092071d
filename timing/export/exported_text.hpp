// Text that the exporters write: valid UTF-8 whatever bytes the caller gave (Note [Exported
// text]). Internal; header-only so that accgraph::perfetto, a library of its own, compiles the
// same code.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "utf8.hpp"

namespace accgraph::timing::detail {

// Note [Exported text]: names, paths, metadata, backend and device names come from the caller
// and may hold any bytes. Every exporter writes them as valid UTF-8: a byte that does not
// belong to a well-formed UTF-8 sequence (a stray continuation byte, a truncated sequence, an
// overlong form, a surrogate, a code point above U+10FFFF) becomes U+FFFD, one per byte, so
// valid text round-trips exactly. On top of that, each format escapes what it must: JSON
// escapes control characters, CSV quotes fields per RFC 4180, the text table shows control
// characters as \xNN (\u00NN for C1 controls) so every row stays one line and no terminal
// escape sequence gets through.
using ::accgraph::detail::kReplacement;  // U+FFFD
using ::accgraph::detail::utf8_sequence_length;
using ::accgraph::detail::valid_utf8;  // `text` as valid UTF-8 (Note [Exported text])

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

// Appends `text` to `buffer` as a JSON string: valid UTF-8 (Note [Exported text]), with quotes,
// backslashes and control characters escaped (the latter as \u00XX).
inline void append_json_string(std::string& buffer, std::string_view text) {
  buffer += '"';
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text.substr(i));
    if (length == 0) {
      buffer += kReplacement;
      ++i;
      continue;
    }
    if (length == 1) {
      const char c = text[i];
      if (c == '"' || c == '\\') {
        buffer += '\\';
        buffer += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        fmt::format_to(std::back_inserter(buffer), "\\u{:04x}", static_cast<unsigned char>(c));
      } else {
        buffer += c;
      }
    } else {
      buffer.append(text, i, length);
    }
    i += length;
  }
  buffer += '"';
}

// Appends a number that parses back to exactly `value`: the shortest round-trip form, with
// ".0" on integral values, as nlohmann::json wrote them (so a reader still sees a float).
inline void append_json_double(std::string& buffer, double value) {
  const size_t start = buffer.size();
  fmt::format_to(std::back_inserter(buffer), "{}", value);
  if (buffer.find_first_of(".eEn", start) == std::string::npos) buffer += ".0";
}

}  // namespace accgraph::timing::detail
