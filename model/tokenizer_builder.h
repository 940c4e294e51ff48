// The tiny test tokenizer of MODEL.md §11, built rather than shipped so tests and tiny
// checkpoints can make one anywhere:
//   ids 0-4        bos, eos, pad, User, Assistant (the literal strings of tokenizer.h)
//   ids 5..260     the 256 byte tokens, id 5 + b = byte b (GPT-2 byte-level spelling)
//   ids 261..V-2   merged tokens, learned by plain BPE on a built-in English corpus
//   id  V-1        <｜dspark▁noise｜>
// All six specials are listed in added_tokens. The pre_tokenizer is ByteLevel with the
// GPT-2 split regex.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::model {

// tokenizer.json text; the same bytes on every call. Throws troupe::Error when
// vocab_size is below 262 (no room for the fixed ids) or above what the corpus can
// learn (a little over 4096).
std::string build_tiny_tokenizer_json(int64_t vocab_size = 4096);

}  // namespace troupe::model
