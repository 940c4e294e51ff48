// Writes a random-weight LLaMA-family model (support/llama_ref.h's RefLlama) as a
// Hugging Face folder: config.json of the matching transformers class, one
// model.safetensors and a small byte-level BPE tokenizer.json + tokenizer_config.json
// (Qwen2's form: ChatML, eos <|endoftext|>, no bos). The tensors hold the reference's
// values exactly, so the folder and the GGUF file they came from are the same model.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/byte_level.h"
#include "model/gguf_writer.h"
#include "model/safetensors.h"
#include "support/llama_ref.h"

namespace troupe::testing {

struct HfDirSpec {
  model::LlamaArch arch = model::LlamaArch::Llama;
  model::DType dtype = model::DType::F32;  // must hold the reference's values exactly
  bool tied = false;                        // no lm_head.weight
  int64_t context = 64;
  int64_t shared_ffn = 0;                   // qwen2moe
};

// A `llama` GGUF file's q/k rows are llama.cpp's permutation of HF's (its converter
// interleaves the two rotate_half halves of each head so adjacent-pair RoPE matches):
// GGUF row h·hd + 2i + j holds HF row h·hd + j·hd/2 + i. This undoes it.
inline DVec hf_rows_from_gguf(const RefMatrix& w, int64_t heads, int64_t hd) {
  DVec out(w.w.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < w.cols; ++c)
          out[(h * hd + j * hd / 2 + i) * w.cols + c] = w.w[(h * hd + 2 * i + j) * w.cols + c];
  return out;
}

// The tokenizer: 256 byte tokens, a few merges, then <|endoftext|>, <|im_start|>,
// <|im_end|>. Returns its size (smaller than the model's vocabulary, as HF's padding is).
inline int64_t write_hf_test_tokenizer(const std::string& dir) {
  using json = nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[model::byte_to_unicode(uint8_t(b))] = b;
  const std::vector<std::pair<std::string, std::string>> merges{{"a", "b"}, {"c", "ab"}, {"b", "c"}};
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    vocab[l + r] = vocab.size();
    merge_list.push_back(l + " " + r);
  }
  json added = json::array();
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", vocab.size() + added.size()}, {"content", t}, {"special", true}});
  const int64_t size = int64_t(vocab.size() + added.size());
  std::ofstream(dir + "/tokenizer.json")
      << json{{"added_tokens", added},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}}
             .dump();
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"eos_token", "<|endoftext|>"},
              {"chat_template", "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n'}}{% endfor %}"}}
             .dump();
  return size;
}

inline nlohmann::json hf_config_json(const RefLlama& m, const HfDirSpec& s) {
  nlohmann::json c{{"hidden_size", m.D}, {"num_hidden_layers", m.L}, {"num_attention_heads", m.H},
                   {"num_key_value_heads", m.KV}, {"vocab_size", m.V},
                   {"max_position_embeddings", s.context}, {"rope_theta", m.theta},
                   {"rms_norm_eps", m.eps}, {"tie_word_embeddings", s.tied}, {"hidden_act", "silu"},
                   {"bos_token_id", 1}, {"eos_token_id", 2}, {"torch_dtype", "float32"}};
  switch (s.arch) {
    case model::LlamaArch::Llama:
      c["architectures"] = {m.E > 0 ? "MixtralForCausalLM" : "LlamaForCausalLM"};
      c["intermediate_size"] = m.F;
      if (m.E > 0) c["num_local_experts"] = m.E, c["num_experts_per_tok"] = m.K;
      break;
    case model::LlamaArch::Qwen2:
      c["architectures"] = {"Qwen2ForCausalLM"};
      c["intermediate_size"] = m.F;
      c["use_sliding_window"] = false, c["sliding_window"] = 4096;
      break;
    case model::LlamaArch::Qwen2Moe:
      c["architectures"] = {"Qwen2MoeForCausalLM"};
      c["num_experts"] = m.E, c["num_experts_per_tok"] = m.K, c["moe_intermediate_size"] = m.F;
      c["shared_expert_intermediate_size"] = s.shared_ffn, c["norm_topk_prob"] = false;
      c["intermediate_size"] = 4 * m.F, c["decoder_sparse_step"] = 1, c["mlp_only_layers"] = nlohmann::json::array();
      break;
  }
  return c;
}

// Writes m (read from a GGUF file of s.arch) as an HF folder at dir (which exists).
inline void write_hf_llama_dir(const RefLlama& m, const HfDirSpec& s, const std::string& dir) {
  model::SafetensorsWriter w;
  // The matrices in s.dtype (the GGUF file stored them in that type); vectors and the
  // router in F32, as write_tiny_llama keeps them.
  auto put = [&](const std::string& name, std::vector<int64_t> shape, const DVec& v,
                 model::DType dtype = model::DType::F32) {
    const model::GgmlType as = dtype == model::DType::BF16  ? model::GgmlType::BF16
                               : dtype == model::DType::F16 ? model::GgmlType::F16
                                                            : model::GgmlType::F32;
    w.add(name, dtype, std::move(shape), model::encode_ggml(as, std::vector<float>(v.begin(), v.end())));
  };
  auto mat = [&](const std::string& name, const RefMatrix& r) { put(name, {r.rows, r.cols}, r.w, s.dtype); };
  const bool permuted = s.arch == model::LlamaArch::Llama;  // a `llama` GGUF's q/k rows
  mat("model.embed_tokens.weight", m.embd);
  put("model.norm.weight", {m.D}, m.output_norm);
  if (!s.tied) mat("lm_head.weight", m.output);
  for (int64_t l = 0; l < m.L; ++l) {
    const RefLayer& L = m.layers[size_t(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
    put(p + "input_layernorm.weight", {m.D}, L.attn_norm);
    put(p + "post_attention_layernorm.weight", {m.D}, L.ffn_norm);
    put(a + "q_proj.weight", {L.wq.rows, L.wq.cols}, permuted ? hf_rows_from_gguf(L.wq, m.H, m.hd) : L.wq.w, s.dtype);
    put(a + "k_proj.weight", {L.wk.rows, L.wk.cols}, permuted ? hf_rows_from_gguf(L.wk, m.KV, m.hd) : L.wk.w, s.dtype);
    mat(a + "v_proj.weight", L.wv);
    mat(a + "o_proj.weight", L.wo);
    if (!L.bq.empty()) {
      put(a + "q_proj.bias", {int64_t(L.bq.size())}, L.bq);
      put(a + "k_proj.bias", {int64_t(L.bk.size())}, L.bk);
      put(a + "v_proj.bias", {int64_t(L.bv.size())}, L.bv);
    }
    if (m.E == 0) {
      mat(p + "mlp.gate_proj.weight", L.gate[0]);
      mat(p + "mlp.up_proj.weight", L.up[0]);
      mat(p + "mlp.down_proj.weight", L.down[0]);
      continue;
    }
    const bool qwen = s.arch == model::LlamaArch::Qwen2Moe;
    const std::string moe = p + (qwen ? "mlp." : "block_sparse_moe.");
    put(moe + "gate.weight", {L.router.rows, L.router.cols}, L.router.w);
    for (int64_t e = 0; e < m.E; ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      mat(x + (qwen ? "gate_proj" : "w1") + ".weight", L.gate[size_t(e)]);
      mat(x + (qwen ? "up_proj" : "w3") + ".weight", L.up[size_t(e)]);
      mat(x + (qwen ? "down_proj" : "w2") + ".weight", L.down[size_t(e)]);
    }
    if (qwen) {
      mat(moe + "shared_expert.gate_proj.weight", L.sh_gate);
      mat(moe + "shared_expert.up_proj.weight", L.sh_up);
      mat(moe + "shared_expert.down_proj.weight", L.sh_down);
      put(moe + "shared_expert_gate.weight", {1, m.D}, L.sh_gate_inp);
    }
  }
  w.write(dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << hf_config_json(m, s).dump(2);
  write_hf_test_tokenizer(dir);
}

}  // namespace troupe::testing
