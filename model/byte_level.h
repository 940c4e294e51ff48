// GPT-2's byte-to-unicode map (MODEL.md §11). Byte-level BPE vocabularies spell every
// byte as one printable character, so tokens are whitespace-free strings: printable
// Latin-1 bytes stand for themselves, the other 68 bytes map to U+0100.. in byte order
// (space 0x20 -> 'Ġ' U+0120, newline 0x0A -> 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::model {

// UTF-8 of the character that spells byte b.
const std::string& byte_to_unicode(uint8_t b);

// The byte that character c spells, or -1 when c is not in the map.
int unicode_to_byte(char32_t c);

// Appends the byte-level spelling of raw bytes.
void append_byte_level(std::string& out, std::string_view raw);

// Appends the raw bytes a byte-level token spells. Returns false, appending nothing,
// when some character of the token is not in the map.
bool append_byte_level_decoded(std::string& out, std::string_view token);

}  // namespace troupe::model
