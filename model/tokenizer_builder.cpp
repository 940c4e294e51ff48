#include "model/tokenizer_builder.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kernels/check.h"
#include "model/byte_level.h"
#include "model/pre_split.h"
#include "model/tiny_corpus.h"
#include "model/tokenizer.h"

namespace troupe::model {
namespace {

using Pair = std::pair<int32_t, int32_t>;
struct PairHash {
  size_t operator()(const Pair& p) const {
    return std::hash<uint64_t>()((static_cast<uint64_t>(p.first) << 32) |
                                 static_cast<uint32_t>(p.second));
  }
};
using PairCounts = std::unordered_map<Pair, int64_t, PairHash>;

constexpr int32_t kFirstByteId = 5;         // ids 0-4 are the leading specials
constexpr int64_t kFixedIds = 5 + 256 + 1;  // specials, bytes, noise
constexpr int64_t kMaxVocab = 1 << 16;      // far above what the corpus can learn

struct Word {
  std::vector<int32_t> symbols;  // token ids, bytes at first
  int64_t count = 0;             // occurrences in the corpus
};

struct Vocab {
  std::vector<std::string> tokens;  // id -> spelling
  std::unordered_map<std::string, int32_t> ids;
  std::vector<Pair> merges;  // rank order

  int32_t find_or_add(const std::string& spelling) {
    auto [it, added] = ids.try_emplace(spelling, static_cast<int32_t>(tokens.size()));
    if (added) tokens.push_back(spelling);
    return it->second;
  }
};

// The corpus as its distinct GPT-2 pieces, spelled in byte ids, in sorted order.
std::vector<Word> corpus_words() {
  const std::string text = tiny_corpus();
  std::map<std::string_view, int64_t> counts;
  for (std::string_view piece : gpt2_split(text)) ++counts[piece];
  std::vector<Word> words;
  for (const auto& [piece, count] : counts) {
    Word w{{}, count};
    for (char c : piece) w.symbols.push_back(kFirstByteId + static_cast<uint8_t>(c));
    words.push_back(std::move(w));
  }
  return words;
}

void add_pairs(const Word& w, int64_t sign, PairCounts& counts) {
  for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
    auto it = counts.try_emplace({w.symbols[i], w.symbols[i + 1]}, 0).first;
    it->second += sign * w.count;
    if (it->second == 0) counts.erase(it);
  }
}

// The most frequent pair; among equals the smallest, so training is deterministic.
std::optional<Pair> most_frequent(const PairCounts& counts) {
  std::optional<Pair> best;
  int64_t best_count = 0;
  for (const auto& [pair, count] : counts) {
    if (count > best_count || (count == best_count && pair < *best))
      best = pair, best_count = count;
  }
  return best;
}

bool contains(const Word& w, Pair p) {
  for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
    if (w.symbols[i] == p.first && w.symbols[i + 1] == p.second) return true;
  }
  return false;
}

// Replaces the occurrences of p, left to right without overlap (as "a a" in "aaa").
void merge_in_word(Word& w, Pair p, int32_t merged) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < w.symbols.size(); ++i) {
    if (i + 1 < w.symbols.size() && w.symbols[i] == p.first && w.symbols[i + 1] == p.second) {
      out.push_back(merged);
      ++i;
    } else {
      out.push_back(w.symbols[i]);
    }
  }
  w.symbols = std::move(out);
}

// Plain BPE: merge the most frequent adjacent pair until the vocab has vocab_size - 1
// tokens. A merge whose spelling already exists (a + bc after ab + c) reuses its id.
Vocab train(int64_t vocab_size) {
  Vocab v;
  for (std::string_view s : {kBosToken, kEosToken, kPadToken, kUserToken, kAssistantToken}) {
    v.find_or_add(std::string(s));
  }
  for (int b = 0; b < 256; ++b) v.find_or_add(byte_to_unicode(static_cast<uint8_t>(b)));
  std::vector<Word> words = corpus_words();
  PairCounts counts;
  for (const Word& w : words) add_pairs(w, +1, counts);
  while (static_cast<int64_t>(v.tokens.size()) < vocab_size - 1) {
    const std::optional<Pair> best = most_frequent(counts);
    if (!best) {
      TROUPE_FAIL("tiny tokenizer: the built-in corpus yields at most "
                  << v.tokens.size() + 1 << " tokens, asked for " << vocab_size);
    }
    const int32_t merged = v.find_or_add(v.tokens[best->first] + v.tokens[best->second]);
    v.merges.push_back(*best);
    for (Word& w : words) {
      if (!contains(w, *best)) continue;
      add_pairs(w, -1, counts);
      merge_in_word(w, *best, merged);
      add_pairs(w, +1, counts);
    }
  }
  v.find_or_add(std::string(kNoiseToken));
  return v;
}

nlohmann::ordered_json special_token(size_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

std::string to_json(const Vocab& v) {
  using ojson = nlohmann::ordered_json;
  ojson added = ojson::array();
  for (size_t id : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, v.tokens.size() - 1}) {
    added.push_back(special_token(id, v.tokens[id]));
  }
  ojson vocab = ojson::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) vocab[v.tokens[id]] = id;
  ojson merges = ojson::array();
  for (const Pair& p : v.merges) merges.push_back(v.tokens[p.first] + " " + v.tokens[p.second]);
  const ojson byte_level = {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", true},
                            {"use_regex", true}};
  ojson model = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false}};
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  ojson root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = byte_level;
  root["post_processor"] = nullptr;
  root["decoder"] = byte_level;
  root["model"] = std::move(model);
  return root.dump(1) + "\n";
}

}  // namespace

std::string build_tiny_tokenizer_json(int64_t vocab_size) {
  TROUPE_CHECK(vocab_size >= kFixedIds && vocab_size <= kMaxVocab, "vocab_size ", vocab_size,
               " must be in [", kFixedIds, ", ", kMaxVocab, "]");
  return to_json(train(vocab_size));
}

}  // namespace troupe::model
