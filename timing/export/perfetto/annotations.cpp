// Typed Perfetto debug annotations from accgraph's text metadata (Note [Typed annotations]).
#include "annotations.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace accgraph::timing::detail {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The index after the digits of `text` that start at `i` (`i` itself when none do).
size_t skip_digits(std::string_view text, size_t i) {
  while (i < text.size() && is_digit(text[i])) ++i;
  return i;
}

bool char_at(std::string_view text, size_t i, char c) { return i < text.size() && text[i] == c; }

// Length of the JSON number at the start of `text` (0 if none): -?(0|[1-9][0-9]*)(.[0-9]+)?
// ([eE][+-]?[0-9]+)?; `integral` tells whether it had neither fraction nor exponent.
size_t json_number_length(std::string_view text, bool& integral) {
  size_t i = char_at(text, 0, '-') ? 1 : 0;
  if (i >= text.size() || !is_digit(text[i])) return 0;
  i = text[i] == '0' ? i + 1 : skip_digits(text, i);
  integral = true;
  if (char_at(text, i, '.')) {
    const size_t end = skip_digits(text, i + 1);
    if (end == i + 1) return 0;
    i = end;
    integral = false;
  }
  if (char_at(text, i, 'e') || char_at(text, i, 'E')) {
    size_t digits = i + 1;
    if (char_at(text, digits, '+') || char_at(text, digits, '-')) ++digits;
    const size_t end = skip_digits(text, digits);
    if (end == digits) return 0;
    i = end;
    integral = false;
  }
  return i;
}

// Sets `annotation`'s value from a scalar literal; false (nothing set) when `text` is none.
bool set_scalar(pftrace::DebugAnnotation& annotation, std::string_view text) {
  if (text == "true" || text == "false") {
    annotation.set_bool_value(text == "true");
    return true;
  }
  bool integral = false;
  if (text.empty() || json_number_length(text, integral) != text.size()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (integral) {
    int64_t signed_value = 0;
    if (auto [end, error] = std::from_chars(first, last, signed_value);
        error == std::errc() && end == last) {
      annotation.set_int_value(signed_value);
      return true;
    }
    uint64_t unsigned_value = 0;
    if (auto [end, error] = std::from_chars(first, last, unsigned_value);
        error == std::errc() && end == last) {
      annotation.set_uint_value(unsigned_value);
      return true;
    }
    return false;  // out of range: keep the text
  }
  double value = 0;
  auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last || !std::isfinite(value)) return false;
  annotation.set_double_value(value);
  return true;
}

std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Fills `annotation`'s array_values from "[a, b, ...]"; false (nothing set) when `text` is not
// such a list.
bool set_list(pftrace::DebugAnnotation& annotation, std::string_view text) {
  if (text.size() < 3 || text.front() != '[' || text.back() != ']') return false;
  std::string_view items = text.substr(1, text.size() - 2);
  pftrace::DebugAnnotation scratch;
  std::vector<pftrace::DebugAnnotation> values;
  for (;;) {
    const size_t comma = items.find(',');
    scratch.Clear();
    if (!set_scalar(scratch, trim_blanks(items.substr(0, comma)))) return false;
    values.push_back(scratch);
    if (comma == std::string_view::npos) break;
    items.remove_prefix(comma + 1);
  }
  for (pftrace::DebugAnnotation& value : values) *annotation.add_array_values() = std::move(value);
  return true;
}

}  // namespace

void set_typed_value(pftrace::DebugAnnotation& annotation, std::string_view value) {
  if (set_scalar(annotation, value) || set_list(annotation, value)) return;
  annotation.set_string_value(std::string(value));
}

}  // namespace accgraph::timing::detail
