#include "model/utf8.h"

#include <cstdint>

namespace troupe::model {

Utf8Char next_utf8(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {b0, 1, true};
  // Well-formed sequences (Unicode Table 3-7): the lead byte fixes the length and the
  // allowed range of the second byte, which excludes overlongs, surrogates and > U+10FFFF.
  int trail = 0;
  char32_t cp = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    trail = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    trail = 2, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    trail = 3, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {0xFFFD, 1, false};
  }
  int length = 1;
  for (int k = 0; k < trail; ++k) {
    if (pos + length >= s.size()) return {0xFFFD, length, false};
    const auto b = static_cast<uint8_t>(s[pos + length]);
    if (b < lo || b > hi) return {0xFFFD, length, false};
    cp = (cp << 6) | (b & 0x3F);
    ++length;
    lo = 0x80, hi = 0xBF;
  }
  return {cp, length, true};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Char c = next_utf8(bytes, pos);
    if (c.valid) {
      out.append(bytes.substr(pos, c.length));
    } else {
      append_utf8(out, 0xFFFD);
    }
    pos += c.length;
  }
  return out;
}

}  // namespace troupe::model
