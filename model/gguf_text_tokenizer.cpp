#include "model/gguf_text_tokenizer.h"

namespace troupe::model {

std::vector<int32_t> GgufTextTokenizer::encode(std::string_view text, bool add_bos) const {
  // BOS only where the file asks for it (tokenizer.ggml.add_bos_token), as generate does.
  return spm_.encode(text, add_bos && spm_.adds_bos());
}

std::string GgufTextTokenizer::decode(std::span<const int32_t> ids, bool) const {
  return spm_.decode(ids, /*strip_prefix_space=*/false);
}

}  // namespace troupe::model
