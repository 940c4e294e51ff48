// tokenizer.json (model/tokenizer_load): the bytes are the file. A tokenizer that loads
// must also encode and decode: a text with its added tokens, and its first ids back.
// Contract: a bad file is a troupe::Error; any other exception is a finding.
#include <numeric>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "model/tokenizer.h"

namespace troupe::fuzz {

void tokenizer_json(const uint8_t* data, size_t size) {
  std::optional<model::Tokenizer> tok;
  try {
    tok.emplace(model::Tokenizer::from_json(as_text(data, size)));
  } catch (const Error&) {
    return;
  }
  const std::string text =
      "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xff" + std::string(model::kEosToken) + "  \n\t x";
  (void)tok->decode(tok->encode(text, true), true);
  std::vector<int32_t> ids(std::min<int64_t>(tok->vocab_size(), 512));
  std::iota(ids.begin(), ids.end(), 0);
  (void)tok->decode(ids);
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::tokenizer_json)
