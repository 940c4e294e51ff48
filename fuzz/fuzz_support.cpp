#include "fuzz/fuzz_support.h"

#include "model/tokenizer.h"

namespace troupe::fuzz {
const model::Tokenizer& tiny_tokenizer() {
  static const model::Tokenizer tok = model::Tokenizer::load(TROUPE_FUZZ_TOKENIZER);
  return tok;
}

const net::openai::ServingInfo& tiny_serving_info() {
  static const net::openai::ServingInfo info = [] {
    net::openai::ServingInfo i;
    i.model_name = "v41-tiny-seed7";
    i.max_model_len = 256;
    i.max_body_bytes = 64 * 1024;
    return i;
  }();
  return info;
}

std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace troupe::fuzz
