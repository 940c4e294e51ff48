// The pre-tokenizer splits of byte-level BPE vocabularies: text -> the pieces BPE runs on
// one at a time. Each is a hand-written scanner for a regex HF tokenizers (Oniguruma) and
// llama.cpp apply, with \p{L}, \p{N} and \s as Oniguruma defines them (std::regex cannot
// express \p{L}, hence the scanners). The pieces concatenate back to the text; each byte
// of ill-formed UTF-8 is a piece of its own (it belongs to no class), so it becomes one
// byte token.
//
//   Gpt2   (MODEL.md §11; GGUF pre "gpt2"):
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama3 (LLaMA-3's tokenizer.json; GGUF pre "llama-bpe"):
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2  (GGUF pre "qwen2"): Llama3 with \p{N} one digit at a time instead of {1,3}.
//
// The (?i:) of the contractions is ASCII case folding here (Oniguruma also folds a few
// non-ASCII letters, e.g. U+017F, onto s; no real text relies on that).
#pragma once

#include <string_view>
#include <vector>

namespace troupe::model {

enum class PreSplit { None, Gpt2, Llama3, Qwen2 };

// The regexes above as HF tokenizer.json files spell them (Split pre-tokenizer patterns).
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string_view> gpt2_split(std::string_view text);
// max_digits: 3 for Llama3, 1 for Qwen2.
std::vector<std::string_view> llama3_split(std::string_view text, int max_digits);
// The split of kind (None: the whole text as one piece, nothing for empty text).
std::vector<std::string_view> pre_split(PreSplit kind, std::string_view text);

}  // namespace troupe::model
