// GGUF architectures `qwen2` and `qwen2moe` (issue 15): what their metadata becomes
// (llama.cpp's keys, its fallbacks for the expert widths, NEOX RoPE, q/k/v biases,
// routing without renormalisation), and bad files that name their fault. The logits of
// such files against the reference are in llama_forward_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "kernels/check.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/llama_ref.h"

namespace troupe::model {
namespace {

testing::TinyLlamaSpec qwen2moe_spec() {
  testing::TinyLlamaSpec s;
  s.arch = LlamaArch::Qwen2Moe;
  s.experts = 8, s.top_k = 2, s.seed = 41;
  return s;
}

// The keys every qwen2moe test file below has (no widths, no expert counts).
void qwen2moe_shape(GgufWriter& w) {
  w.set_string("general.architecture", "qwen2moe");
  w.set_u32("qwen2moe.context_length", 32);
  w.set_u32("qwen2moe.embedding_length", 64);
  w.set_u32("qwen2moe.block_count", 1);
  w.set_u32("qwen2moe.attention.head_count", 4);
  w.set_f32("qwen2moe.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32("qwen2moe.vocab_size", 10);
}

// The error load() gives, "" when it loads.
std::string load_error(const std::string& path) {
  try {
    LlamaModel::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen2Gguf, ConfigOfEachArchitecture) {
  test::TempDir dir;
  testing::TinyLlamaSpec dense;
  dense.arch = LlamaArch::Qwen2;
  testing::write_tiny_llama(dense, dir.file("q.gguf"));
  testing::write_tiny_llama(qwen2moe_spec(), dir.file("moe.gguf"));
  const LlamaConfig q = llama_config_from_gguf(GgufFile::open(dir.file("q.gguf")));
  EXPECT_EQ(q.arch, LlamaArch::Qwen2);
  EXPECT_TRUE(q.rope_neox && q.qkv_bias);
  EXPECT_FALSE(q.is_moe() || q.has_shared_expert());
  EXPECT_EQ(q.ffn_dim, 96);
  EXPECT_EQ(q.kv_heads, 2);
  const LlamaConfig m = llama_config_from_gguf(GgufFile::open(dir.file("moe.gguf")));
  EXPECT_EQ(m.arch, LlamaArch::Qwen2Moe);
  EXPECT_TRUE(m.rope_neox && m.qkv_bias);
  EXPECT_FALSE(m.renormalize_topk);
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.experts_used, 2);
  EXPECT_EQ(m.ffn_dim, 96);         // expert_feed_forward_length
  EXPECT_EQ(m.shared_ffn_dim, 128);  // expert_shared_feed_forward_length
  const auto model = LlamaModel::load(dir.file("moe.gguf"));
  EXPECT_EQ(model->weights.layers[1].shared_gate_inp.size(), 64u);
  EXPECT_EQ(model->weights.layers[1].bk.size(), 2u * 16);
}

// Without the expert keys llama.cpp takes feed_forward_length / expert_used_count for an
// expert and feed_forward_length for the shared one.
TEST(Qwen2Gguf, ExpertWidthsFallBackAsLlamaCppDoes) {
  GgufWriter w;
  qwen2moe_shape(w);
  w.set_u32("qwen2moe.feed_forward_length", 192);
  w.set_u32("qwen2moe.expert_count", 4);
  w.set_u32("qwen2moe.expert_used_count", 2);
  const std::vector<uint8_t> bytes = w.bytes();
  const LlamaConfig c = llama_config_from_gguf(GgufFile::parse(bytes, "m.gguf"));
  EXPECT_EQ(c.ffn_dim, 96);
  EXPECT_EQ(c.shared_ffn_dim, 192);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.rms_eps, 1e-6f);
}

TEST(Qwen2Gguf, BadFilesNameTheirFault) {
  test::TempDir dir;
  testing::TinyLlamaSpec s = qwen2moe_spec();
  s.drop_tensor = "blk.1.ffn_gate_inp_shexp.weight";
  testing::write_tiny_llama(s, dir.file("no-gate.gguf"));
  EXPECT_NE(load_error(dir.file("no-gate.gguf")).find("'blk.1.ffn_gate_inp_shexp.weight' [64] is missing"),
            std::string::npos) << load_error(dir.file("no-gate.gguf"));
  s.drop_tensor = "blk.0.attn_k.bias";
  testing::write_tiny_llama(s, dir.file("no-bias.gguf"));
  EXPECT_NE(load_error(dir.file("no-bias.gguf")).find("'blk.0.attn_k.bias' [32] is missing"),
            std::string::npos) << load_error(dir.file("no-bias.gguf"));
  s.drop_tensor = "blk.0.ffn_down_shexp.weight";
  testing::write_tiny_llama(s, dir.file("no-down.gguf"));
  EXPECT_NE(load_error(dir.file("no-down.gguf")).find("'blk.0.ffn_down_shexp.weight' [128, 64] is missing"),
            std::string::npos) << load_error(dir.file("no-down.gguf"));
  {  // truncated
    s.drop_tensor.clear();
    testing::write_tiny_llama(s, dir.file("m.gguf"));
    std::ifstream in(dir.file("m.gguf"), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(dir.file("cut.gguf"), std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
  }
  EXPECT_NE(load_error(dir.file("cut.gguf")).find("truncated"), std::string::npos)
      << load_error(dir.file("cut.gguf"));
  EXPECT_EQ(load_error(dir.file("m.gguf")), "");
}

TEST(Qwen2Gguf, BadMetadataNamesTheKey) {
  auto config_error = [](const std::function<void(GgufWriter&)>& edit) {
    GgufWriter w;
    qwen2moe_shape(w);
    edit(w);
    const std::vector<uint8_t> bytes = w.bytes();
    try {
      llama_config_from_gguf(GgufFile::parse(bytes, "m.gguf"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // No expert count: not a qwen2moe model.
  EXPECT_NE(config_error([](GgufWriter& w) {
              w.set_u32("qwen2moe.feed_forward_length", 64);
              w.set_u32("qwen2moe.expert_feed_forward_length", 32);
            }).find("needs expert_count"),
            std::string::npos);
  // No width for the experts at all.
  EXPECT_NE(config_error([](GgufWriter& w) { w.set_u32("qwen2moe.expert_count", 4); })
                .find("qwen2moe.expert_feed_forward_length is missing"),
            std::string::npos);
  // No shared expert width.
  EXPECT_NE(config_error([](GgufWriter& w) {
              w.set_u32("qwen2moe.expert_count", 4);
              w.set_u32("qwen2moe.expert_used_count", 2);
              w.set_u32("qwen2moe.expert_feed_forward_length", 32);
            }).find("the shared expert's width is 0"),
            std::string::npos);
  // Another architecture names the three troupe reads.
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  const std::vector<uint8_t> bytes = w.bytes();
  try {
    llama_config_from_gguf(GgufFile::parse(bytes, "m.gguf"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'qwen3' is not supported"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'qwen2moe'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::model
