// Parameter, byte and state arithmetic (model/footprint.h) against MODEL.md's own
// figures and an independent closed-form count, and `troupe inspect` end to end.
#include "model/footprint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "model/safetensors.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

const std::string kGoldenDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

TEST(Footprint, GlobalKvBytesPerTokenMatchesSpec) {
  EXPECT_EQ(global_kv_bytes_per_token(preset_config("v41-flash")), 890.0);  // MODEL.md §4
  EXPECT_EQ(global_kv_bytes_per_token(preset_config("v41-tiny")), 212.0);   // MODEL.md §10
}

TEST(Footprint, RequestState) {
  const auto flash = request_state_bytes(preset_config("v41-flash"));
  EXPECT_EQ(flash.swa_bytes, 40 * 128 * 528);   // "full 2.7 MB"
  EXPECT_EQ(flash.compressor_bytes, 3 * 4096);  // 4 KiB per ratio-2 Full layer
  EXPECT_EQ(flash.dspark_bytes, 128 * 5120 * 4 + 3 * 128 * 512 * 4);
  const auto tiny = request_state_bytes(preset_config("v41-tiny"));
  EXPECT_EQ(tiny.swa_bytes, 12 * 16 * (128 + 4));
  EXPECT_EQ(tiny.compressor_bytes, 2 * 2 * 128 * 4);
}

// MODEL.md §1 "Activated params check", written as one closed form per layer kind.
int64_t closed_form_decode(const ModelConfig& c) {
  const int64_t V = c.vocab_size, H = c.hidden_size, hc = c.hc_mult, mix = (2 + hc) * hc;
  const int64_t Q = c.q_lora_rank, D = c.head_dim, nh = c.num_attention_heads,
                GO = c.o_groups * c.o_lora_rank;
  const int64_t nI = c.index_n_heads, dI = c.index_head_dim, I = c.moe_intermediate_size;
  const int64_t nE = c.n_routed_experts, kE = c.top_k;
  const int64_t nG = c.engram_n_heads * (c.engram_max_ngram_size - 1), eD = c.engram_head_dim;
  int64_t total = 2 * V * H + H + hc * hc * H + hc + 1;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    total += Q * H + nh * D * Q + D * H + GO * (nh * D / c.o_groups) + H * GO;  // attention
    total += 2 * H + Q + D + nh + 2 * (mix * hc * H + mix + 3);                 // norms, sink, mHC
    total += nE * H + nE + (1 + kE) * 3 * I * H;                                // gate, experts
    const LayerMode m = c.layer_mode[l];
    if (m == LayerMode::Full) total += D * H * (c.ratio(l) > 1 ? 2 : 1) + D + dI * D + dI;
    if (m == LayerMode::Full || m == LayerMode::Reindex) total += nI * dI * Q + nI * H;
    if (c.is_engram_layer(l)) total += (hc + 1) * H * nG * eD + 2 * hc * H + nG * eD;
  }
  return total;
}

TEST(Footprint, FlashParameterCounts) {
  const ModelConfig c = preset_config("v41-flash");
  const ParamSummary s = summarize_params(c, checkpoint_tensor_specs(c));
  EXPECT_EQ(s.target_experts.params, int64_t(40) * 384 * 3 * 5120 * 2304);    // ≈ 544B
  EXPECT_EQ(s.engram_tables.params, (int64_t(384006168) + 384016682) * 256);  // ≈ 196.6B
  EXPECT_EQ(s.draft_experts.params, int64_t(3) * 128 * 3 * 5120 * 2304);
  EXPECT_EQ(s.total.params, s.target_experts.params + s.draft_experts.params +
                                s.engram_tables.params + s.dense.params);
  EXPECT_EQ(s.activated_decode, closed_form_decode(c));
  // MODEL.md's rounded check: ≈16.3B decode, ≈8B prefill; we also count gates, mHC,
  // indexers, compressors and Engram projections, which adds ~0.5B.
  EXPECT_GT(s.activated_decode, 16.3e9);
  EXPECT_LT(s.activated_decode, 17.0e9);
  EXPECT_GT(s.activated_prefill, 8.0e9);
  EXPECT_LT(s.activated_prefill, 8.8e9);
  // FP4 experts: I·H/2 data + I·H/32 scale bytes per matrix.
  const int64_t expert_bytes = 3 * (2304 * 5120 / 2 + 2304 * 160);
  EXPECT_EQ(s.target_experts.bytes, expert_bytes * 384 * 40);
}

// v41-small (make-tiny-model --preset v41-small): a few billion parameters, FP4 experts,
// and a decode step that reads far more than a CPU's caches (memory-bound), yet small
// enough to write and load on a 24 GB machine.
TEST(Footprint, SmallPresetIsAFewBillionParametersWithMemoryBoundDecode) {
  const ModelConfig c = preset_config("v41-small");
  const ParamSummary s = summarize_params(c, checkpoint_tensor_specs(c));
  EXPECT_EQ(s.target_experts.params, int64_t(12) * 64 * 3 * 2048 * 1024);
  const int64_t expert_bytes = 3 * (1024 * 2048 / 2 + 1024 * 2048 / 32);  // FP4 data + scales
  EXPECT_EQ(s.target_experts.bytes, expert_bytes * 64 * 12);
  EXPECT_GT(s.total.params, 4e9);
  EXPECT_LT(s.total.params, 7e9);
  EXPECT_LT(s.total.bytes, 4e9);  // writes and loads within this machine's memory
  EXPECT_GT(s.activated_decode, 400e6);  // > 100 MB per token at any dtype: past L3
  EXPECT_EQ(s.activated_decode, closed_form_decode(c));
}

TEST(Footprint, TinyMatchesGoldenCheckpoint) {
  const ModelConfig c = load_config(kGoldenDir + "/config.json");
  const ParamSummary s = summarize_params(c, checkpoint_tensor_specs(c));
  const Checkpoint ckpt = Checkpoint::open(kGoldenDir);
  int64_t bytes = 0;
  std::map<DType, int64_t> by_dtype;
  for (const auto& [name, t] : ckpt.tensors()) bytes += t.nbytes, by_dtype[t.dtype] += t.nbytes;
  EXPECT_EQ(s.total.bytes, bytes);
  EXPECT_EQ(s.bytes_by_dtype, by_dtype);
  EXPECT_EQ(s.activated_decode, closed_form_decode(c));
  EXPECT_EQ(s.target_experts.params, 12 * 32 * 3 * 256 * 128);  // "≈ 37.7M"
}

TEST(Footprint, RankMemorySplitsExperts) {
  const ModelConfig c = preset_config("v41-flash");
  const ParamSummary s = summarize_params(c, checkpoint_tensor_specs(c));
  const int64_t expert = 3 * (2304 * 5120 / 2 + 2304 * 160);
  const RankMemory m4 = rank_memory(c, s, 4);
  EXPECT_EQ(m4.target_experts_per_rank, 96);
  EXPECT_EQ(m4.draft_experts_per_rank, 32);
  EXPECT_EQ(m4.expert_bytes, (96 * 40 + 32 * 3) * expert);
  EXPECT_EQ(m4.dense_bytes, s.dense.bytes);
  const RankMemory m5 = rank_memory(c, s, 5);  // uneven: the busiest rank holds ceil(n/5)
  EXPECT_EQ(m5.target_experts_per_rank, 77);
  EXPECT_EQ(m5.draft_experts_per_rank, 26);
  const RankMemory m1 = rank_memory(c, s, 1);
  EXPECT_EQ(m1.weight_bytes() + m1.engram_sharded_bytes, s.total.bytes);
}

std::string run(const std::string& args) {
  const std::string cmd = std::string(TROUPE_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  return out;
}

TEST(Inspect, PrintsFlashFigures) {
  const std::string out = run("inspect --preset v41-flash --dep 8");
  EXPECT_NE(out.find("890 B/token"), std::string::npos) << out;
  EXPECT_NE(out.find("Reindex  24,28,32,36"), std::string::npos) << out;
  EXPECT_NE(out.find("Reuse    3-7,9-13,15-19,21-23,25-27,29-31,33-35,37-39"), std::string::npos)
      << out;
  EXPECT_NE(out.find("2703360 B"), std::string::npos) << out;
}

TEST(Inspect, ValidatesTheGoldenCheckpoint) {
  const std::string out = run("inspect --model " + kGoldenDir);
  EXPECT_NE(out.find("212 B/token"), std::string::npos) << out;
  EXPECT_NE(out.find("2939 tensors"), std::string::npos) << out;
  EXPECT_NE(run("inspect --preset nope").find("unknown model preset"), std::string::npos);
  EXPECT_NE(run("inspect").find("usage"), std::string::npos);
}

}  // namespace
}  // namespace troupe::model
