#include "model/pre_split.h"

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


// ---- Llama3 / Qwen2 ----------------------------------------------------------------------

bool is_cr_or_lf(char c) { return c == '\r' || c == '\n'; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d): the match length or 0.
size_t contraction_length_folded(std::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  auto lower = [&](size_t i) {
    const char c = i < text.size() ? text[i] : '\0';
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const char a = lower(pos + 1), b = lower(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return std::string_view("stmd").find(a) != std::string_view::npos ? 2 : 0;
}

// End of the run of characters of class cls from pos, at most max_count of them.
size_t run_end_bounded(std::string_view text, size_t pos, CharClass cls, int max_count) {
  for (int n = 0; n < max_count && pos < text.size(); ++n) {
    const ScannedChar c = scan(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// \s*[\r\n]+ at pos: the whitespace run up to and including its last \r or \n (the
// greedy \s* gives back characters until [\r\n]+ matches, which then cannot extend past
// the last one); 0 when the run holds neither.
size_t newline_run_length(std::string_view text, size_t pos) {
  size_t end = pos, through_last_newline = 0;
  while (end < text.size()) {
    const ScannedChar c = scan(text, end);
    if (c.cls != CharClass::Space) break;
    end += c.length;
    if (is_cr_or_lf(text[end - 1])) through_last_newline = end - pos;
  }
  return through_last_newline;
}

size_t llama3_piece_length(std::string_view text, size_t pos, int max_digits) {
  const ScannedChar head = scan(text, pos);
  if (head.cls == CharClass::Invalid) return 1;
  if (size_t n = contraction_length_folded(text, pos)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (head.cls == CharClass::Letter) return run_end(text, pos, CharClass::Letter) - pos;
  const size_t after = pos + head.length;
  const bool head_may_lead = !is_cr_or_lf(text[pos]) && head.cls != CharClass::Number;
  if (head_may_lead && after < text.size() && scan(text, after).cls == CharClass::Letter)
    return run_end(text, after, CharClass::Letter) - pos;
  // \p{N}{1,max_digits}
  if (head.cls == CharClass::Number) return run_end_bounded(text, pos, CharClass::Number, max_digits) - pos;
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t body = head.cls == CharClass::Other ? pos : text.npos;
  if (text[pos] == ' ' && after < text.size() && scan(text, after).cls == CharClass::Other) body = after;
  if (body != text.npos) {
    size_t end = run_end(text, body, CharClass::Other);
    while (end < text.size() && is_cr_or_lf(text[end])) ++end;
    return end - pos;
  }
  // \s*[\r\n]+ | \s+(?!\S) | \s+   (head is a space character here)
  if (size_t n = newline_run_length(text, pos)) return n;
  return whitespace_length(text, pos);
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


std::vector<std::string_view> llama3_split(std::string_view text, int max_digits) {
  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = llama3_piece_length(text, pos, max_digits);
    pieces.push_back(text.substr(pos, n));
    pos += n;
  }
  return pieces;
}

std::vector<std::string_view> pre_split(PreSplit kind, std::string_view text) {
  switch (kind) {
    case PreSplit::Gpt2: return gpt2_split(text);
    case PreSplit::Llama3: return llama3_split(text, 3);
    case PreSplit::Qwen2: return llama3_split(text, 1);
    case PreSplit::None: break;
  }
  if (text.empty()) return {};
  return {text};
}

}  // namespace troupe::model
