// UTF-8 well-formedness, the one check the library's text handling shares (core-internal, not
// installed): the exporters' valid text (Note [Exported text] in timing/export/exported_text.hpp),
// the engine's untimed lines (timing/engine/report_store.cpp) and the loader's escaping of plugin
// names and paths (registry/shared_library.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace accgraph::detail {

/// The length of the well-formed UTF-8 sequence at the start of `text` (Unicode table 3-7:
/// no overlong form, no surrogate, nothing above U+10FFFF), or 0 if there is none; 1 for ASCII.
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

/// What stands for a byte that belongs to no well-formed sequence: U+FFFD.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

/// `text` as valid UTF-8: each byte that belongs to no well-formed sequence becomes U+FFFD, so
/// valid text comes back unchanged (Note [Exported text] in timing/export/exported_text.hpp).
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

}  // namespace accgraph::detail
