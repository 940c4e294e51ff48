#include "bench/peer/peer_files.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/check.h"
#include "model/gguf_writer.h"
#include "model/llama_config.h"

namespace troupe::bench {
namespace {

const PeerShape kShapes[] = {
    {"dense", 32000, 1024, 24, 16, 4, 4096, 0, 0, 2048},
    {"moe", 32000, 1024, 8, 16, 4, 512, 64, 6, 2048},
    {"dense-small", 512, 128, 2, 4, 2, 256, 0, 0, 1024},
    {"moe-small", 512, 128, 2, 4, 2, 64, 8, 2, 1024},
};

// splitmix64: fast and seeded; the files only need to be reproducible, not statistical.
struct Rng {
  uint64_t s;
  float uniform() {  // [-1, 1)
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(z >> 40) * 0x1p-23f - 1.0f;
  }
};

std::vector<float> random_values(Rng& rng, int64_t n, float scale, float offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + scale * rng.uniform();
  return v;
}

// <unk>, <s>, </s>, <0x00>..<0xFF>, then "a".."zzz" with and without the ▁ word marker.
void add_vocab(model::GgufWriter& w, int64_t vocab) {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};  // UNKNOWN, CONTROL (llama.cpp's token types)
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);  // BYTE
  }
  for (int len = 1; int64_t(tokens.size()) < vocab; ++len) {
    int64_t count = 1;
    for (int i = 0; i < len; ++i) count *= 26;
    for (int64_t c = 0; c < count && int64_t(tokens.size()) < vocab; ++c)
      for (const char* prefix : {"\xE2\x96\x81", ""}) {
        if (int64_t(tokens.size()) >= vocab) break;
        std::string piece(len, 'a');
        for (int64_t i = len - 1, x = c; i >= 0; --i, x /= 26) piece[i] = char('a' + x % 26);
        tokens.push_back(prefix + piece);
        types.push_back(1);  // NORMAL
      }
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
}

}  // namespace

const PeerShape& peer_shape(const std::string& name) {
  for (const PeerShape& s : kShapes)
    if (name == s.name) return s;
  TROUPE_FAIL("unknown peer shape '" << name << "' (dense, moe, dense-small, moe-small)");
}

int64_t total_params(const PeerShape& s) {
  const int64_t hd = s.dim / s.heads;
  const int64_t attn = 2 * s.dim * s.heads * hd + 2 * s.dim * s.kv_heads * hd;
  const int64_t mlp = 3 * s.dim * s.ffn * (s.experts > 0 ? s.experts : 1) + s.dim * s.experts;
  return s.layers * (attn + mlp) + 2 * s.vocab * s.dim;
}

int64_t active_params(const PeerShape& s) {
  const int64_t hd = s.dim / s.heads;
  const int64_t attn = 2 * s.dim * s.heads * hd + 2 * s.dim * s.kv_heads * hd;
  const int64_t mlp = 3 * s.dim * s.ffn * (s.experts > 0 ? s.top_k : 1) + s.dim * s.experts;
  return s.layers * (attn + mlp) + s.vocab * s.dim;
}

void write_peer_file(const PeerShape& s, model::GgmlType type, uint64_t seed, const std::string& path) {
  Rng rng{seed};
  const int64_t hd = s.dim / s.heads;
  model::GgufWriter w;
  model::LlamaConfig c;
  c.vocab_size = s.vocab, c.dim = s.dim, c.layers = s.layers, c.ffn_dim = s.ffn, c.heads = s.heads;
  c.kv_heads = s.kv_heads, c.head_dim = hd, c.context_length = s.context;
  c.experts = s.experts, c.experts_used = s.top_k;
  model::write_llama_config(c, std::string("troupe-peer-") + s.name, w);
  add_vocab(w, s.vocab);
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, int64_t planes = 0) {
    std::vector<int64_t> ne{cols, rows};
    if (planes > 0) ne.push_back(planes);
    const int64_t n = rows * cols * (planes > 0 ? planes : 1);
    w.add_tensor(name, type, ne, random_values(rng, n, 1.0f / std::sqrt(float(cols))));
  };
  auto norm = [&](const std::string& name) {
    w.add_tensor(name, model::GgmlType::F32, {s.dim}, random_values(rng, s.dim, 0.25f, 1.0f));
  };
  matrix("token_embd.weight", s.vocab, s.dim);
  norm("output_norm.weight");
  matrix("output.weight", s.vocab, s.dim);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", s.heads * hd, s.dim);
    matrix(p + "attn_k.weight", s.kv_heads * hd, s.dim);
    matrix(p + "attn_v.weight", s.kv_heads * hd, s.dim);
    matrix(p + "attn_output.weight", s.dim, s.heads * hd);
    norm(p + "ffn_norm.weight");
    if (s.experts == 0) {
      matrix(p + "ffn_gate.weight", s.ffn, s.dim);
      matrix(p + "ffn_up.weight", s.ffn, s.dim);
      matrix(p + "ffn_down.weight", s.dim, s.ffn);
      continue;
    }
    // The router in F32, as llama.cpp's converters keep it, scaled so routing is decisive.
    w.add_tensor(p + "ffn_gate_inp.weight", model::GgmlType::F32, {s.dim, s.experts},
                 random_values(rng, s.experts * s.dim, 4.0f / std::sqrt(float(s.dim))));
    matrix(p + "ffn_gate_exps.weight", s.ffn, s.dim, s.experts);
    matrix(p + "ffn_up_exps.weight", s.ffn, s.dim, s.experts);
    matrix(p + "ffn_down_exps.weight", s.dim, s.ffn, s.experts);
  }
  w.write(path);
}

}  // namespace troupe::bench
