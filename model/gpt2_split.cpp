#include "model/gpt2_split.h"

#include "model/unicode_tables.h"
#include "model/utf8.h"

namespace troupe::model {
namespace {

// The classes the regex distinguishes. Invalid = a byte of ill-formed UTF-8.
enum class CharClass { Letter, Number, Space, Other, Invalid };

struct ScannedChar {
  CharClass cls;
  size_t length;
};

ScannedChar scan(std::string_view text, size_t pos) {
  const Utf8Char c = next_utf8(text, pos);
  if (!c.valid) return {CharClass::Invalid, 1};
  const size_t n = static_cast<size_t>(c.length);
  if (is_unicode_letter(c.code_point)) return {CharClass::Letter, n};
  if (is_unicode_number(c.code_point)) return {CharClass::Number, n};
  if (is_unicode_space(c.code_point)) return {CharClass::Space, n};
  return {CharClass::Other, n};
}

// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as in GPT-2): the match length or 0.
size_t contraction_length(std::string_view text, size_t pos) {
  if (text[pos] != '\'') return 0;
  const std::string_view rest = text.substr(pos + 1);
  for (std::string_view s : {"re", "ve", "ll"}) {
    if (rest.starts_with(s)) return 3;
  }
  if (!rest.empty() && std::string_view("stmd").find(rest[0]) != std::string_view::npos) return 2;
  return 0;
}

// End of the run of class cls starting at pos.
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const ScannedChar c = scan(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// \s+(?!\S)|\s+ at pos (a space character): the greedy run, backed off by one
// character when a non-space follows, so that last space can lead the next piece
// (" ?\p{L}+" and friends); a single space character before a non-space stays whole.
size_t whitespace_length(std::string_view text, size_t pos) {
  size_t end = pos, last = pos, count = 0;
  while (end < text.size()) {
    const ScannedChar c = scan(text, end);
    if (c.cls != CharClass::Space) break;
    last = end;
    end += c.length;
    ++count;
  }
  if (end == text.size() || count == 1) return end - pos;
  return last - pos;
}

// Length of the regex match that starts at pos: the first alternative that matches.
size_t piece_length(std::string_view text, size_t pos) {
  ScannedChar head = scan(text, pos);
  if (head.cls == CharClass::Invalid) return 1;
  if (size_t n = contraction_length(text, pos)) return n;
  size_t body = pos;
  // " ?": an ASCII space joins a following letter, number or other run.
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    const ScannedChar next = scan(text, pos + 1);
    if (next.cls != CharClass::Space && next.cls != CharClass::Invalid) head = next, body = pos + 1;
  }
  if (head.cls == CharClass::Space) return whitespace_length(text, pos);
  return run_end(text, body, head.cls) - pos;
}

}  // namespace

std::vector<std::string_view> gpt2_split(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = piece_length(text, pos);
    pieces.push_back(text.substr(pos, n));
    pos += n;
  }
  return pieces;
}

}  // namespace troupe::model
