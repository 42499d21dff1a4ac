// UTF-8 validation and the \xHH spelling of stray bytes (see utf8_text.h).
#include "engine/io/utf8_text.h"

#include <cstdint>

namespace cnn::io {

namespace {
// The length of the valid UTF-8 sequence that starts at text[at], or 0 when there is none.
size_t valid_sequence_length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0, smallest = 0;
  if ((lead & 0xE0) == 0xC0) length = 2, code = lead & 0x1F, smallest = 0x80;
  else if ((lead & 0xF0) == 0xE0) length = 3, code = lead & 0x0F, smallest = 0x800;
  else if ((lead & 0xF8) == 0xF0) length = 4, code = lead & 0x07, smallest = 0x10000;
  else return 0;  // a continuation byte or 0xF8..0xFF where a sequence should start
  if (at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
    code = code << 6 | (byte(at + i) & 0x3F);
  }
  const bool overlong = code < smallest, surrogate = code >= 0xD800 && code <= 0xDFFF;
  return overlong || surrogate || code > 0x10FFFF ? 0 : length;
}
}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = valid_sequence_length(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string printable_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t length = valid_sequence_length(text, at);
    if (length > 0) {
      out.append(text.substr(at, length));
      at += length;
      continue;
    }
    const auto b = static_cast<uint8_t>(text[at++]);
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 0xF];
  }
  return out;
}

}  // namespace cnn::io
