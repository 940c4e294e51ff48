// The built-in training text of the tiny test tokenizer (tokenizer_builder.h).
#pragma once

#include <string>
#include <string_view>

namespace troupe::model {

// About 9 KB of plain English prose (ASCII).
std::string_view tiny_corpus_prose();

// The training text: the prose, then an index of its distinct words, each in lower,
// Title and UPPER case, then the numbers 0-999. Deterministic.
std::string tiny_corpus();

}  // namespace troupe::model
