// What every fuzz target shares (docs/fuzzing.md): the entry function's signature, the
// tiny model's tokenizer and serving limits for the targets that need them.
//
// Each fuzz/<name>_fuzz.cpp defines one entry `void <name>(const uint8_t*, size_t)` in
// troupe::fuzz and, built with -DTROUPE_LIBFUZZER (the clang build, TROUPE_FUZZ=ON), the
// libFuzzer hook that calls it. The normal build links the same entries into
// troupe_tests, which feeds them every corpus and regression file
// (tests/fuzz_regressions_test.cpp), so a g++-only CI still replays each crash found.
//
// An entry returns normally for input the parser accepts or rejects the way its contract
// says (a troupe::Error, an ApiError value, an error frame); anything else (a crash, a
// sanitizer report, an exception of another type) escapes and is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/tokenizer.h"  // complete: the parsers take it as a model::TextTokenizer
#include "net/openai/request_parse.h"

namespace troupe::fuzz {

using Entry = void (*)(const uint8_t* data, size_t size);

// The tiny test model's tokenizer.json (tests/data/v41-tiny-seed7), loaded once.
const model::Tokenizer& tiny_tokenizer();

// The limits `troupe serve` would check requests against for the tiny model, with a small
// body limit so that fuzzed inputs reach the 413 paths.
const net::openai::ServingInfo& tiny_serving_info();

std::string_view as_text(const uint8_t* data, size_t size);

}  // namespace troupe::fuzz

// The libFuzzer hook for an entry (only in the clang fuzz build).
#ifdef TROUPE_LIBFUZZER
#define TROUPE_FUZZ_MAIN(entry)                                             \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    entry(data, size);                                                      \
    return 0;                                                               \
  }
#else
#define TROUPE_FUZZ_MAIN(entry)
#endif
