// UTF-8 decoding that never fails: ill-formed input is reported, not thrown, so the
// tokenizer can encode any bytes and decode to valid text.
#pragma once

#include <string>
#include <string_view>

namespace troupe::model {

struct Utf8Char {
  char32_t code_point = 0;  // U+FFFD when !valid
  int length = 1;           // bytes consumed; for ill-formed input the maximal subpart
  bool valid = true;
};

// Decodes the character at s[pos] (pos < s.size()). An ill-formed sequence comes back
// with valid == false and length == its "maximal subpart" (Unicode §3.9), the unit that
// Python's and Rust's lossy decoders replace by one U+FFFD.
Utf8Char next_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of a valid scalar value.
void append_utf8(std::string& out, char32_t cp);

// Returns bytes as valid UTF-8, each maximal ill-formed subpart replaced by U+FFFD
// (HF tokenizers' decode: String::from_utf8_lossy, Python's errors="replace").
std::string utf8_lossy(std::string_view bytes);

}  // namespace troupe::model
