#include "model/weights.h"

#include <cstring>

#include "kernels/check.h"
#include "kernels/q8_row_groups.h"
#include "kernels/quant.h"

namespace troupe::model {
namespace {

using kernels::WeightFormat;
using kernels::WeightView;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Binder {
 public:
  Binder(const Checkpoint& ckpt, std::vector<std::unique_ptr<std::vector<float>>>& owned)
      : ckpt_(ckpt), owned_(owned) {}

  WeightView fp8(const std::string& prefix, int64_t rows, int64_t cols) {
    return quantized(prefix, WeightFormat::FP8, rows, cols, DType::F8_E4M3, {rows, cols},
                     {ceil_div(rows, 32), ceil_div(cols, 32)});
  }
  WeightView fp4(const std::string& prefix, int64_t rows, int64_t cols) {
    WeightView w;
    w.format = WeightFormat::FP4;
    w.rows = rows;
    w.cols = cols;
    w.data = ckpt_.get(prefix + ".weight", {DType::I8, DType::U8}, {rows, cols / 2}).data;
    w.scale = scale(prefix, {rows, cols / 32});
    return w;
  }
  WeightView rowfp8(const std::string& prefix, int64_t rows, int64_t cols) {
    return quantized(prefix, WeightFormat::ROWFP8, rows, cols, DType::F8_E4M3, {rows, cols},
                     {rows, cols / 32});
  }
  WeightView bf16(const std::string& name, int64_t rows, int64_t cols) {
    WeightView w;
    w.format = WeightFormat::BF16;
    w.rows = rows;
    w.cols = cols;
    w.data = ckpt_.get(name, {DType::BF16}, {rows, cols}).data;
    return w;
  }
  // F32 matrices are copied so the kernels always see aligned floats.
  WeightView f32(const std::string& name, int64_t rows, int64_t cols) {
    WeightView w;
    w.format = WeightFormat::F32;
    w.rows = rows;
    w.cols = cols;
    const auto& t = ckpt_.get(name, {DType::F32}, {rows, cols});
    auto buf = std::make_unique<std::vector<float>>(rows * cols);
    std::memcpy(buf->data(), t.data, t.nbytes);
    w.data = buf->data();
    owned_.push_back(std::move(buf));
    return w;
  }
  Vec vec_bf16(const std::string& name, std::vector<int64_t> shape) {
    const auto& t = ckpt_.get(name, {DType::BF16}, shape);
    Vec v(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, t.data + 2 * i, 2);
      v[i] = kernels::bf16_decode(bits);
    }
    return v;
  }
  Vec vec_f32(const std::string& name, std::vector<int64_t> shape) {
    const auto& t = ckpt_.get(name, {DType::F32}, shape);
    Vec v(t.numel());
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  }
  template <class T>
  std::vector<T> ints(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    const auto& t = ckpt_.get(name, {dtype}, shape);
    std::vector<T> v(t.numel());
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  }

 private:
  const uint8_t* scale(const std::string& prefix, std::vector<int64_t> shape) {
    return ckpt_.get(prefix + ".scale", {DType::F8_E8M0, DType::U8}, shape).data;
  }
  WeightView quantized(const std::string& prefix, WeightFormat f, int64_t rows, int64_t cols,
                       DType dtype, std::vector<int64_t> shape, std::vector<int64_t> scale_shape) {
    WeightView w;
    w.format = f;
    w.rows = rows;
    w.cols = cols;
    const auto& t = ckpt_.get(prefix + ".weight", {dtype}, shape);
    w.data = t.data;
    w.scale = scale(prefix, scale_shape);
    w.no_nan_codes = kernels::e4m3_nan_free(t.data, t.nbytes);  // the GEMMs then skip their test
    return w;
  }

  const Checkpoint& ckpt_;
  std::vector<std::unique_ptr<std::vector<float>>>& owned_;
};

HcMixWeights bind_hc(Binder& b, const std::string& p, const ModelConfig& c) {
  const int64_t hc = c.hc_mult, n = (2 + hc) * hc;
  return {b.f32(p + "_fn", n, hc * c.hidden_size), b.vec_f32(p + "_base", {n}),
          b.vec_f32(p + "_scale", {3})};
}

AttentionWeights bind_attention(Binder& b, const std::string& p, const ModelConfig& c,
                                LayerMode mode, int64_t ratio) {
  const int64_t H = c.hidden_size, D = c.head_dim, Q = c.q_lora_rank, nh = c.num_attention_heads;
  const int64_t G = c.o_groups, O = c.o_lora_rank;
  AttentionWeights a;
  a.wq_a = b.fp8(p + "wq_a", Q, H);
  a.q_norm = b.vec_bf16(p + "q_norm.weight", {Q});
  a.wq_b = b.fp8(p + "wq_b", nh * D, Q);
  a.wkv = b.fp8(p + "wkv", D, H);
  a.kv_norm = b.vec_bf16(p + "kv_norm.weight", {D});
  a.wo_a = b.fp8(p + "wo_a", G * O, nh * D / G);
  a.wo_b = b.fp8(p + "wo_b", H, G * O);
  a.sink = b.vec_f32(p + "attn_sink", {nh});
  if (mode == LayerMode::Full) {
    a.has_compressor = true;
    a.compressor.wkv = b.f32(p + "compressor.wkv.weight", D, H);
    if (ratio > 1) a.compressor.wgate = b.f32(p + "compressor.wgate.weight", D, H);
    a.compressor.norm = b.vec_bf16(p + "compressor.norm.weight", {D});
  }
  if (mode == LayerMode::Full || mode == LayerMode::Reindex) {
    const int64_t nI = c.index_n_heads, dI = c.index_head_dim;
    a.has_indexer = true;
    a.indexer.wq_b = b.fp8(p + "indexer.wq_b", nI * dI, Q);
    a.indexer.weights_proj = b.bf16(p + "indexer.weights_proj.weight", nI, H);
    if (mode == LayerMode::Full) {
      a.indexer.wk = b.bf16(p + "indexer.wk.weight", dI, D);
      a.indexer.k_norm = b.vec_bf16(p + "indexer.k_norm.weight", {dI});
    }
  }
  return a;
}

kernels::ExpertWeights bind_expert_fp8(Binder& b, const std::string& p, int64_t H, int64_t I) {
  return {b.fp8(p + "w1", I, H), b.fp8(p + "w3", I, H), b.fp8(p + "w2", H, I)};
}

MoeWeights bind_moe(Binder& b, const std::string& p, int64_t n_experts, const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  MoeWeights m;
  m.gate = b.f32(p + "gate.weight", n_experts, H);
  m.gate_bias = b.vec_f32(p + "gate.bias", {n_experts});
  m.shared = bind_expert_fp8(b, p + "shared_experts.", H, I);
  m.experts.reserve(n_experts);
  for (int64_t j = 0; j < n_experts; ++j) {
    const std::string e = p + "experts." + std::to_string(j) + ".";
    m.experts.push_back({b.fp4(e + "w1", I, H), b.fp4(e + "w3", I, H), b.fp4(e + "w2", H, I)});
  }
  return m;
}

EngramWeights bind_engram(Binder& b, const std::string& p, const ModelConfig& c, int64_t index,
                          const std::vector<int64_t>& multipliers) {
  const int64_t H = c.hidden_size, hc = c.hc_mult, N = c.engram_max_ngram_size;
  const int64_t eD = c.engram_head_dim, nG = c.engram_n_heads * (N - 1);
  EngramWeights e;
  e.embed = b.rowfp8(p + "embed", c.engram_num_embeddings[index], eD);
  e.wkv = b.fp8(p + "wkv", (hc + 1) * H, nG * eD);
  e.q_weight = b.vec_bf16(p + "q_weight", {hc, H});
  e.k_weight = b.vec_bf16(p + "k_weight", {hc, H});
  e.multipliers.assign(multipliers.begin() + index * N, multipliers.begin() + (index + 1) * N);
  return e;
}

}  // namespace

ModelWeights bind_weights(const Checkpoint& ckpt, const ModelConfig& c) {
  ModelWeights w;
  Binder b(ckpt, w.owned);
  const int64_t V = c.vocab_size, H = c.hidden_size, hc = c.hc_mult;
  w.embed = b.bf16("embed.weight", V, H);
  w.head = b.bf16("head.weight", V, H);
  w.norm = b.vec_bf16("norm.weight", {H});
  w.hc_head_fn = b.f32("hc_head_fn", hc, hc * H);
  w.hc_head_base = b.vec_f32("hc_head_base", {hc});
  w.hc_head_scale = b.vec_f32("hc_head_scale", {1})[0];
  const int64_t n_engram = static_cast<int64_t>(c.engram_layer_ids.size());
  std::vector<int64_t> multipliers;
  if (n_engram > 0) {
    w.engram_token_map = b.ints<int32_t>("engram.token_map", DType::I32, {V});
    multipliers =
        b.ints<int64_t>("engram.multipliers", DType::I64, {n_engram, c.engram_max_ngram_size});
  }
  w.layers.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    L.attn_norm = b.vec_bf16(p + "attn_norm.weight", {H});
    L.ffn_norm = b.vec_bf16(p + "ffn_norm.weight", {H});
    L.hc_attn = bind_hc(b, p + "hc_attn", c);
    L.hc_ffn = bind_hc(b, p + "hc_ffn", c);
    L.attn = bind_attention(b, p + "attn.", c, c.layer_mode[l], c.ratio(l));
    L.ffn = bind_moe(b, p + "ffn.", c.n_routed_experts, c);
    const int64_t ei = c.engram_index(l);
    if (ei >= 0) {
      L.has_engram = true;
      L.engram = bind_engram(b, p + "engram.", c, ei, multipliers);
    }
  }
  return w;
}

DsparkWeights bind_dspark_weights(const Checkpoint& ckpt, const ModelConfig& c) {
  const int64_t S = c.num_nextn_predict_layers, H = c.hidden_size, V = c.vocab_size;
  const int64_t Mr = c.dspark_markov_rank;
  const int64_t n_t = static_cast<int64_t>(c.dspark_target_layer_ids.size());
  TROUPE_CHECK(S > 0, "bind_dspark_weights: num_nextn_predict_layers is 0 (no draft)");
  DsparkWeights d;
  Binder b(ckpt, d.owned);
  for (int64_t s = 0; s < S; ++s) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    DsparkStageWeights st;
    st.attn_norm = b.vec_bf16(p + "attn_norm.weight", {H});
    st.ffn_norm = b.vec_bf16(p + "ffn_norm.weight", {H});
    st.hc_attn = bind_hc(b, p + "hc_attn", c);
    st.hc_ffn = bind_hc(b, p + "hc_ffn", c);
    st.attn = bind_attention(b, p + "attn.", c, LayerMode::Swa, 0);
    st.ffn = bind_moe(b, p + "ffn.", c.dspark_n_routed_experts, c);
    d.stages.push_back(std::move(st));
  }
  d.main_proj = b.fp8("mtp.0.main_proj", H, n_t * H);
  d.main_norm = b.vec_bf16("mtp.0.main_norm.weight", {H});
  const std::string last = "mtp." + std::to_string(S - 1) + ".";
  d.norm = b.vec_bf16(last + "norm.weight", {H});
  d.markov_embed = b.bf16(last + "markov_head.embed.weight", V, Mr);
  d.markov_head = b.bf16(last + "markov_head.head.weight", V, Mr);
  d.confidence = b.vec_f32(last + "confidence_head.proj.weight", {1, H + Mr});
  return d;
}

WeightView row_slice(const WeightView& w, int64_t r0, int64_t n) {
  TROUPE_CHECK(r0 >= 0 && n >= 0 && r0 + n <= w.rows, "row slice [", r0, ", ", r0 + n,
               ") outside ", w.rows, " rows");
  WeightView s = w;
  s.rows = n;
  switch (w.format) {
    case WeightFormat::F32:
      s.data = static_cast<const float*>(w.data) + r0 * w.cols;
      break;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      s.data = static_cast<const uint16_t*>(w.data) + r0 * w.cols;
      break;
    case WeightFormat::FP8:
      TROUPE_CHECK(r0 % 32 == 0 && (n % 32 == 0 || r0 + n == w.rows),
                   "FP8 row slices must follow 32-row scale blocks");
      s.data = static_cast<const uint8_t*>(w.data) + r0 * w.cols;
      s.scale = w.scale + (r0 / 32) * ceil_div(w.cols, 32);
      break;
    case WeightFormat::FP4:
      // Null where only the groups are kept (model/row_groups_copy.h).
      s.data = w.data ? static_cast<const uint8_t*>(w.data) + r0 * w.cols / 2 : nullptr;
      s.scale = w.scale ? w.scale + r0 * (w.cols / 32) : nullptr;
      s.groups = w.groups && r0 % kernels::kGroupRows == 0 ? kernels::q8_row_groups_at(w, r0) : nullptr;
      break;
    case WeightFormat::ROWFP8:
      s.data = static_cast<const uint8_t*>(w.data) + r0 * w.cols;
      s.scale = w.scale + r0 * (w.cols / 32);
      break;
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
      // Row groups start every 16 rows; a slice starting elsewhere reads the GGUF blocks,
      // which a matrix regrouped in place no longer has.
      TROUPE_CHECK(w.data != nullptr || r0 % kernels::kGroupRows == 0, "row slice at ", r0,
                   " of a ", kernels::to_string(w.format), " matrix regrouped in place: slices must start on a ",
                   kernels::kGroupRows, "-row group");
      s.data = w.data ? static_cast<const uint8_t*>(w.data) + r0 * kernels::ggml_row_bytes(w.format, w.cols) : nullptr;
      s.groups = w.groups && r0 % kernels::kGroupRows == 0 ? kernels::q8_row_groups_at(w, r0) : nullptr;
      break;
  }
  return s;
}

}  // namespace troupe::model
