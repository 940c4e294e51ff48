// GGUF files (model/gguf): the bytes are a whole .gguf file, parsed in place. A file that
// parses has every tensor dequantized end to end (the header checks promise each lies
// inside the bytes, whole blocks), and then goes through the LLaMA-family config (`llama`,
// `qwen2`, `qwen2moe` keys) and weight loader (shapes checked against metadata before
// anything is allocated). Its vocabulary,
// when it has one, becomes a Tokenizer that encodes a text with specials in it, decodes
// the ids back and renders a chat in the file's template family.
// Contract: a bad file is a troupe::Error; any other exception is a finding.
#include <vector>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "model/gguf.h"
#include "model/gguf_dequant.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace troupe::fuzz {

namespace {

void tokenizer_of(const model::GgufFile& f) {
  try {
    const model::Tokenizer t = model::Tokenizer::from_gguf(f);
    const std::vector<int32_t> ids = t.encode("<s>Hello, w\xC3\xB6rld 123\n<|eot_id|>\xFF", true);
    volatile size_t sink = t.decode(ids, false).size() + t.decode(ids, true).size();
    if (t.chat_format() != model::ChatFormat::None)
      sink = model::render_chat(t, {{"system", "s"}, {"user", "u"}}, true).size();
    (void)sink;
  } catch (const Error&) {
  }
}

}  // namespace

void gguf(const uint8_t* data, size_t size) {
  try {
    const auto f = model::GgufFile::parse({data, size}, "fuzz.gguf");
    tokenizer_of(f);
    std::vector<float> out;
    for (const model::GgufTensor& t : f.tensors()) {
      out.resize(static_cast<size_t>(t.numel()));
      model::dequantize_ggml(t.type, t.data, t.numel(), out.data());
    }
    const model::LlamaConfig c = model::llama_config_from_gguf(f);
    volatile size_t sink = model::load_llama_weights(f, c).layers.size();
    (void)sink;
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::gguf)
