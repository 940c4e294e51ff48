// config.json of HF LLaMA-family folders (model/hf_llama_config): the bytes are the file's
// text, read as llama_config_from_hf_json reads it (architectures, transformers' keys of
// each class, the refusals, the config's own validation).
// Contract: a bad file is a troupe::Error; any other exception is a finding.
#include <string_view>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "model/hf_llama_config.h"

namespace troupe::fuzz {

void hf_config(const uint8_t* data, size_t size) {
  try {
    const model::LlamaConfig c = model::llama_config_from_hf_json(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
    volatile int64_t sink = c.layers + c.shared_ffn_dim;
    (void)sink;
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::hf_config)
