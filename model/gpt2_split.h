// The GPT-2 pre-tokenizer split (MODEL.md §11), a hand-written scanner for
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \p{L}, \p{N} and \s as Oniguruma (HF tokenizers' regex engine) defines them.
// std::regex cannot express \p{L}, hence the scanner.
#pragma once

#include <string_view>
#include <vector>

namespace troupe::model {

// The regex's matches, in order; they concatenate back to text. Each byte of ill-formed
// UTF-8 is a piece of its own (it belongs to no class), so it becomes one byte token.
std::vector<std::string_view> gpt2_split(std::string_view text);

}  // namespace troupe::model
