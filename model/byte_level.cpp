#include "model/byte_level.h"

#include <array>

#include "model/utf8.h"

namespace troupe::model {
namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMap {
  std::array<std::string, 256> spelling;
  std::array<int16_t, 512> byte_of;  // every image lies below U+0200; -1 = none

  ByteMap() {
    byte_of.fill(-1);
    int next_shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = stands_for_itself(b) ? b : 256 + next_shifted++;
      append_utf8(spelling[b], c);
      byte_of[c] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().spelling[b];
}

int unicode_to_byte(char32_t c) {
  return c < 512 ? byte_map().byte_of[c] : -1;
}

void append_byte_level(std::string& out, std::string_view raw) {
  for (char ch : raw) out += byte_to_unicode(static_cast<uint8_t>(ch));
}

bool append_byte_level_decoded(std::string& out, std::string_view token) {
  const size_t start = out.size();
  for (size_t pos = 0; pos < token.size();) {
    const Utf8Char c = next_utf8(token, pos);
    const int b = c.valid ? unicode_to_byte(c.code_point) : -1;
    if (b < 0) {
      out.resize(start);
      return false;
    }
    out += static_cast<char>(b);
    pos += c.length;
  }
  return true;
}

}  // namespace troupe::model
