#include "model/gguf_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "kernels/check.h"
#include "model/gguf.h"

namespace troupe::model {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Length of the UTF-8 character starting with byte c (1 for a stray continuation byte or
// an invalid lead, so every byte ends up in some symbol).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4) return 4;
  if (c >= 0xE0) return c <= 0xEF ? 3 : 1;
  if (c >= 0xC2) return 2;
  return 1;
}

int32_t id_or(const GgufFile& f, const std::string& key) {
  return f.find(key) ? static_cast<int32_t>(std::min<uint64_t>(f.get_uint(key), INT32_MAX)) : -1;
}

bool bool_or(const GgufFile& f, const std::string& key, bool fallback) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  if (const auto* b = std::get_if<bool>(&v->value)) return *b;
  TROUPE_FAIL(f.source() << ": metadata key '" << key << "' must be a bool");
}

}  // namespace

SpmTokenizer SpmTokenizer::from_gguf(const GgufFile& f) {
  const std::string kind = f.get_string("tokenizer.ggml.model");
  if (kind != "llama")
    TROUPE_FAIL(f.source() << ": tokenizer.ggml.model '" << kind << "' is not supported yet (troupe "
                           "reads the SentencePiece-style 'llama' vocabulary)");
  const GgufArray& tokens = f.get_array("tokenizer.ggml.tokens");
  const size_t n = tokens.strings.size();
  if (tokens.elem != GgufType::STRING || n == 0)
    TROUPE_FAIL(f.source() << ": tokenizer.ggml.tokens must be a non-empty array of strings");
  std::vector<float> scores(n, 0.0f);
  if (f.find("tokenizer.ggml.scores")) {
    const GgufArray& s = f.get_array("tokenizer.ggml.scores");
    if (s.floats.size() != n) TROUPE_FAIL(f.source() << ": tokenizer.ggml.scores has " << s.size() << " entries for " << n << " tokens");
    for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>(s.floats[i]);
  }
  std::vector<TokenType> types(n, TokenType::Normal);
  if (f.find("tokenizer.ggml.token_type")) {
    const GgufArray& t = f.get_array("tokenizer.ggml.token_type");
    if (t.ints.size() != n) TROUPE_FAIL(f.source() << ": tokenizer.ggml.token_type has " << t.size() << " entries for " << n << " tokens");
    for (size_t i = 0; i < n; ++i) {
      if (t.ints[i] < 1 || t.ints[i] > 6) TROUPE_FAIL(f.source() << ": token " << i << " has unknown type " << t.ints[i]);
      types[i] = static_cast<TokenType>(t.ints[i]);
    }
  }
  return SpmTokenizer(tokens.strings, std::move(scores), std::move(types),
                      id_or(f, "tokenizer.ggml.bos_token_id"), id_or(f, "tokenizer.ggml.eos_token_id"),
                      id_or(f, "tokenizer.ggml.unknown_token_id"),
                      bool_or(f, "tokenizer.ggml.add_space_prefix", true),
                      bool_or(f, "tokenizer.ggml.add_bos_token", true));
}

SpmTokenizer::SpmTokenizer(std::vector<std::string> tokens, std::vector<float> scores,
                           std::vector<TokenType> types, int32_t bos, int32_t eos, int32_t unk,
                           bool add_space_prefix, bool add_bos)
    : tokens_(std::move(tokens)), scores_(std::move(scores)), types_(std::move(types)),
      bos_(bos), eos_(eos), unk_(unk), add_space_prefix_(add_space_prefix), add_bos_(add_bos) {
  const int64_t n = size();
  if (types_.empty()) types_.assign(tokens_.size(), TokenType::Normal);
  TROUPE_CHECK(int64_t(scores_.size()) == n && int64_t(types_.size()) == n,
               "SpmTokenizer: scores and types must have one entry per token");
  for (int32_t id : {bos_, eos_, unk_})
    if (id >= n) TROUPE_FAIL("tokenizer: special token id " << id << " is outside the " << n << " tokens");
  for (int32_t& b : byte_ids_) b = -1;
  for (int32_t i = 0; i < n; ++i) {
    ids_.emplace(tokens_[i], i);  // the first of duplicate spellings wins
    unsigned b = 0;
    char tail = 0;
    if (types_[i] == TokenType::Byte && std::sscanf(tokens_[i].c_str(), "<0x%2X>%c", &b, &tail) == 1 &&
        tokens_[i].size() == 6)
      byte_ids_[b] = i;
    if ((types_[i] == TokenType::User || types_[i] == TokenType::Control) && !tokens_[i].empty())
      literals_.push_back(i);
  }
  std::stable_sort(literals_.begin(), literals_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
}

int32_t SpmTokenizer::find(std::string_view piece) const {
  const auto it = ids_.find(std::string(piece));
  if (it == ids_.end()) return -1;
  const TokenType t = types_[it->second];
  return t == TokenType::Normal || t == TokenType::User ? it->second : -1;
}

int32_t SpmTokenizer::match_literal(std::string_view text, size_t pos, bool parse_special) const {
  for (int32_t id : literals_) {
    if (types_[id] == TokenType::Control && !parse_special) continue;
    if (text.substr(pos).starts_with(tokens_[id])) return id;
  }
  return -1;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  bool after_special = true;  // the text's start counts: it gets the prefix
  size_t piece_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const int32_t id = literals_.empty() ? -1 : match_literal(text, pos, parse_special);
    if (id < 0) {
      ++pos;
      continue;
    }
    if (pos > piece_start) encode_text(text.substr(piece_start, pos - piece_start), after_special, out);
    out.push_back(id);
    after_special = true;
    pos += tokens_[id].size();
    piece_start = pos;
  }
  if (piece_start < text.size()) encode_text(text.substr(piece_start), after_special, out);
  return out;
}

void SpmTokenizer::encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
  std::string s;
  if (add_space_prefix_ && space_prefix) s += kSpace;
  for (char c : text) {
    if (c == ' ') s += kSpace;
    else s += c;
  }
  // Symbols as byte ranges of s in a linked list; a max-queue of adjacent pairs that are
  // tokens, by score then leftmost. A popped pair whose symbols changed since it was
  // queued is stale and skipped, so each merge is the best current pair, as the rule says.
  struct Symbol {
    size_t begin, end;
    int32_t prev, next;  // -1 at the ends
    bool alive = true;   // false once merged into its left neighbour
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < s.size();) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({i, i + len, k - 1, -1, true});
    if (k > 0) sym[k - 1].next = k;
    i += len;
  }
  struct Pair {
    float score;
    int32_t left, right;
    size_t length;  // of the merged text when queued
  };
  auto worse = [&](const Pair& a, const Pair& b) {
    if (a.score != b.score) return a.score < b.score;
    return sym[a.left].begin > sym[b.left].begin;
  };
  std::vector<Pair> queue;
  auto offer = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t length = sym[right].end - sym[left].begin;
    const int32_t id = find(std::string_view(s).substr(sym[left].begin, length));
    if (id < 0) return;
    queue.push_back({scores_[id], left, right, length});
    std::push_heap(queue.begin(), queue.end(), worse);
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k) offer(static_cast<int32_t>(k), static_cast<int32_t>(k + 1));
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), worse);
    const Pair p = queue.back();
    queue.pop_back();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (!l.alive || !r.alive || l.next != p.right || r.end - l.begin != p.length) continue;  // stale
    r.alive = false;
    l.end = r.end;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    offer(l.prev, p.left);
    offer(p.left, l.next);
  }
  for (int32_t k = sym.empty() ? -1 : 0; k >= 0; k = sym[k].next) {
    const std::string_view piece = std::string_view(s).substr(sym[k].begin, sym[k].end - sym[k].begin);
    if (const int32_t id = find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : piece) {
      if (byte_ids_[c] >= 0) out.push_back(byte_ids_[c]);
      else if (unk_ >= 0) out.push_back(unk_);
    }
  }
}

std::string SpmTokenizer::decode(std::span<const int32_t> ids, bool strip_prefix_space,
                                 bool keep_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= size()) continue;
    switch (types_[id]) {
      case TokenType::Control:
        if (keep_special) out += tokens_[id];
        break;
      case TokenType::Unknown: case TokenType::Unused: break;
      case TokenType::Byte: {
        unsigned b = 0;
        if (std::sscanf(tokens_[id].c_str(), "<0x%2X>", &b) == 1) out += static_cast<char>(b);
        break;
      }
      default: {
        const std::string& t = tokens_[id];
        for (size_t i = 0; i < t.size();) {
          if (t.compare(i, kSpace.size(), kSpace) == 0) {
            out += ' ';
            i += kSpace.size();
          } else {
            out += t[i++];
          }
        }
      }
    }
  }
  if (strip_prefix_space && add_space_prefix_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace troupe::model
