// The BPE merge step: a ranked table of (left, right) -> merged token ids, applied
// to one pre-tokenized word at a time.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe::model {

class BpeMerges {
 public:
  // Adds the next rule in file order (its rank is the number of rules added before).
  // A pair listed again keeps its first rank: MODEL.md §11 ranks merges in file order,
  // and the golden tiny tokenizer lists some pairs twice with encodings that follow the
  // first listing. (A reader that fills a hash map in file order keeps the last one.)
  void add(int32_t left, int32_t right, int32_t merged);

  // Merges the symbols of one word: always the lowest-ranked adjacent pair, the
  // leftmost one among equals, until no adjacent pair has a rule.
  std::vector<int32_t> apply(std::span<const int32_t> symbols) const;

  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    int32_t rank;
    int32_t merged;
  };
  const Rule* find(int32_t left, int32_t right) const;

  std::unordered_map<uint64_t, Rule> rules_;  // key: left << 32 | right
  int32_t next_rank_ = 0;
};

}  // namespace troupe::model
