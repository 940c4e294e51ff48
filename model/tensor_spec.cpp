// checkpoint_tensor_specs(): MODEL.md §2 written out as code, one helper per table.
#include "model/tensor_spec.h"

#include <cstring>
#include <limits>

#include "kernels/check.h"
#include "model/engram_hash.h"

namespace troupe::model {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorSpec::bytes() const {
  return numel() * dtype_size(dtypes.front());
}

int64_t TensorSpec::params() const {
  switch (format) {
    case TensorFormat::Scale:
      return 0;
    case TensorFormat::Fp4:
      return 2 * numel();
    default:
      break;
  }
  const DType d = dtypes.front();
  return d == DType::I32 || d == DType::I64 ? 0 : numel();  // index tables, not weights
}

namespace {

const std::vector<DType> kScaleDTypes{DType::F8_E8M0, DType::U8};  // writers write F8_E8M0
const std::vector<DType> kFp4DTypes{DType::I8, DType::U8};         // writers write I8

int64_t ceil32(int64_t x) {
  return (x + 31) / 32;
}

// Appends specs, tagging each with the layer / stage / expert currently being listed.
class SpecList {
 public:
  std::vector<TensorSpec> out;
  int64_t layer = -1, stage = -1, expert = -1;
  bool engram_table = false;
  std::string prefix;  // "layers.3." / "mtp.0." / ""

  void plain(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    add(name, {dtype}, std::move(shape), TensorFormat::Plain);
  }
  void bf16(const std::string& name, std::vector<int64_t> shape) {
    plain(name, DType::BF16, shape);
  }
  void f32(const std::string& name, std::vector<int64_t> shape) { plain(name, DType::F32, shape); }
  // Quantized matrix [r, c]: `<base>.weight` plus `<base>.scale`.
  void fp8(const std::string& base, int64_t r, int64_t c) {
    add(base + ".weight", {DType::F8_E4M3}, {r, c}, TensorFormat::Fp8);
    add(base + ".scale", kScaleDTypes, {ceil32(r), ceil32(c)}, TensorFormat::Scale);
  }
  void fp4(const std::string& base, int64_t r, int64_t c) {
    add(base + ".weight", kFp4DTypes, {r, c / 2}, TensorFormat::Fp4);
    add(base + ".scale", kScaleDTypes, {r, c / 32}, TensorFormat::Scale);
  }
  void rowfp8(const std::string& base, int64_t r, int64_t c) {
    add(base + ".weight", {DType::F8_E4M3}, {r, c}, TensorFormat::RowFp8);
    add(base + ".scale", kScaleDTypes, {r, c / 32}, TensorFormat::Scale);
  }

 private:
  void add(const std::string& name, std::vector<DType> dtypes, std::vector<int64_t> shape,
           TensorFormat format) {
    out.push_back({prefix + name, std::move(dtypes), std::move(shape), format, layer, stage, expert,
                   engram_table});
  }
};

void add_globals(SpecList& s, const ModelConfig& c) {
  const int64_t V = c.vocab_size, H = c.hidden_size, hc = c.hc_mult;
  s.bf16("embed.weight", {V, H});
  s.bf16("norm.weight", {H});
  s.bf16("head.weight", {V, H});
  s.f32("hc_head_fn", {hc, hc * H});
  s.f32("hc_head_base", {hc});
  s.f32("hc_head_scale", {1});
  if (c.engram_layer_ids.empty()) return;
  s.plain("engram.token_map", DType::I32, {V});
  s.plain("engram.multipliers", DType::I64,
          {int64_t(c.engram_layer_ids.size()), c.engram_max_ngram_size});
}

// The tensors every target layer and every DSpark stage has: norms, mHC mixes, SWA attention.
void add_block_common(SpecList& s, const ModelConfig& c) {
  const int64_t H = c.hidden_size, hc = c.hc_mult, mix = (2 + hc) * hc;
  const int64_t Q = c.q_lora_rank, D = c.head_dim, nh = c.num_attention_heads;
  const int64_t G = c.o_groups, O = c.o_lora_rank;
  s.bf16("attn_norm.weight", {H});
  s.bf16("ffn_norm.weight", {H});
  for (const char* site : {"attn", "ffn"}) {
    s.f32(std::string("hc_") + site + "_fn", {mix, hc * H});
    s.f32(std::string("hc_") + site + "_base", {mix});
    s.f32(std::string("hc_") + site + "_scale", {3});
  }
  s.fp8("attn.wq_a", Q, H);
  s.bf16("attn.q_norm.weight", {Q});
  s.fp8("attn.wq_b", nh * D, Q);
  s.fp8("attn.wkv", D, H);
  s.bf16("attn.kv_norm.weight", {D});
  s.fp8("attn.wo_a", G * O, nh * D / G);
  s.fp8("attn.wo_b", H, G * O);
  s.f32("attn.attn_sink", {nh});
}

// Compressor (Full) and indexer (Full / Reindex) of a compressed layer.
void add_csa(SpecList& s, const ModelConfig& c, LayerMode mode, int64_t ratio) {
  const int64_t H = c.hidden_size, D = c.head_dim, Q = c.q_lora_rank;
  const int64_t nI = c.index_n_heads, dI = c.index_head_dim;
  if (mode == LayerMode::Full) {
    s.f32("attn.compressor.wkv.weight", {D, H});
    if (ratio > 1) s.f32("attn.compressor.wgate.weight", {D, H});
    s.bf16("attn.compressor.norm.weight", {D});
  }
  if (mode == LayerMode::Full || mode == LayerMode::Reindex) {
    s.fp8("attn.indexer.wq_b", nI * dI, Q);
    s.bf16("attn.indexer.weights_proj.weight", {nI, H});
  }
  if (mode == LayerMode::Full) {
    s.bf16("attn.indexer.wk.weight", {dI, D});
    s.bf16("attn.indexer.k_norm.weight", {dI});
  }
}

// MoE: router, one shared expert (FP8) and n_experts routed experts (FP4), all width I.
void add_moe(SpecList& s, const ModelConfig& c, int64_t n_experts) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  s.f32("ffn.gate.weight", {n_experts, H});
  s.f32("ffn.gate.bias", {n_experts});
  s.fp8("ffn.shared_experts.w1", I, H);
  s.fp8("ffn.shared_experts.w2", H, I);
  s.fp8("ffn.shared_experts.w3", I, H);
  for (int64_t j = 0; j < n_experts; ++j) {
    s.expert = j;
    const std::string e = "ffn.experts." + std::to_string(j);
    s.fp4(e + ".w1", I, H);
    s.fp4(e + ".w2", H, I);
    s.fp4(e + ".w3", I, H);
  }
  s.expert = -1;
}

void add_engram(SpecList& s, const ModelConfig& c, int64_t i) {
  const int64_t H = c.hidden_size, hc = c.hc_mult, eD = c.engram_head_dim;
  const int64_t lookups = c.engram_n_heads * (c.engram_max_ngram_size - 1);
  s.engram_table = true;
  s.rowfp8("engram.embed", c.engram_num_embeddings[i], eD);
  s.engram_table = false;
  s.fp8("engram.wkv", (hc + 1) * H, lookups * eD);
  s.bf16("engram.q_weight", {hc, H});
  s.bf16("engram.k_weight", {hc, H});
}

void add_dspark_stage(SpecList& s, const ModelConfig& c, int64_t stage) {
  const int64_t H = c.hidden_size, V = c.vocab_size, Mr = c.dspark_markov_rank;
  const int64_t n_targets = int64_t(c.dspark_target_layer_ids.size());
  add_block_common(s, c);
  add_moe(s, c, c.dspark_n_routed_experts);
  if (stage == 0) {
    s.fp8("main_proj", H, n_targets * H);
    s.bf16("main_norm.weight", {H});
  }
  if (stage == c.num_nextn_predict_layers - 1) {
    s.bf16("norm.weight", {H});
    s.bf16("markov_head.embed.weight", {V, Mr});
    s.bf16("markov_head.head.weight", {V, Mr});
    s.f32("confidence_head.proj.weight", {1, H + Mr});
  }
}

}  // namespace

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& c) {
  TROUPE_CHECK(int64_t(c.layer_mode.size()) == c.num_hidden_layers,
               "checkpoint_tensor_specs needs a finalized ModelConfig");
  SpecList s;
  add_globals(s, c);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    s.layer = l;
    s.prefix = "layers." + std::to_string(l) + ".";
    add_block_common(s, c);
    add_csa(s, c, c.layer_mode[l], c.ratio(l));
    add_moe(s, c, c.n_routed_experts);
    if (c.is_engram_layer(l)) add_engram(s, c, c.engram_index(l));
  }
  s.layer = -1;
  for (int64_t st = 0; st < c.num_nextn_predict_layers; ++st) {
    s.stage = st;
    s.prefix = "mtp." + std::to_string(st) + ".";
    add_dspark_stage(s, c, st);
  }
  return std::move(s.out);
}

namespace {

// Little-endian integers out of the mapping (which need not be aligned for T).
template <class T>
std::vector<T> read_ints(const TensorInfo& t) {
  std::vector<T> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  return v;
}

void check_engram_values(const Checkpoint& ckpt, const ModelConfig& c) {
  const int64_t cV = c.engram_compressed_vocab_size, N = c.engram_max_ngram_size;
  const auto map = read_ints<int32_t>(*ckpt.find("engram.token_map"));
  for (size_t i = 0; i < map.size(); ++i)
    if (map[i] < 0 || map[i] >= cV)
      TROUPE_FAIL("tensor 'engram.token_map': entry "
                  << i << " = " << map[i] << " is outside [0, engram_compressed_vocab_size = " << cV
                  << ")");
  // Bound from §7: c_k * mult cannot overflow int64 for any compressed id c_k < cV.
  const int64_t bound = std::numeric_limits<int64_t>::max() / cV;
  const auto mult = read_ints<int64_t>(*ckpt.find("engram.multipliers"));
  for (size_t i = 0; i < mult.size(); ++i)
    if (mult[i] < 1 || mult[i] > bound)
      TROUPE_FAIL("tensor 'engram.multipliers': entry ["
                  << i / N << "][" << i % N << "] = " << mult[i] << " is outside [1, " << bound
                  << "]");
}

// The table sizes are stored in the config but defined by §7's primes; a mismatch means
// the config and the hashing disagree, which no tensor shape check would catch.
void check_engram_table_sizes(const ModelConfig& c) {
  const std::vector<int64_t> sums = engram_num_embeddings(c);
  for (size_t i = 0; i < sums.size(); ++i)
    if (c.engram_num_embeddings[i] != sums[i])
      TROUPE_FAIL("key 'engram_num_embeddings': entry " << i << " (layer " << c.engram_layer_ids[i]
                                                        << ") is " << c.engram_num_embeddings[i]
                                                        << " but the prime sum of MODEL.md §7 is "
                                                        << sums[i]);
}

}  // namespace

void validate_checkpoint(const Checkpoint& ckpt, const ModelConfig& c) {
  if (!c.engram_layer_ids.empty()) check_engram_table_sizes(c);
  for (const TensorSpec& t : checkpoint_tensor_specs(c)) ckpt.get(t.name, t.dtypes, t.shape);
  if (!c.engram_layer_ids.empty()) check_engram_values(ckpt, c);
}

}  // namespace troupe::model
