// make-tiny-model: deterministic bytes per seed, every MODEL.md §2 tensor present and
// valid, quantized the way the real checkpoint is, and runnable end to end.
#include "model/tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/sampling.h"
#include "model/forward.h"
#include "model/safetensors.h"
#include "model/tensor_spec.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace troupe::model {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class TinyCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("troupe-tiny-" + std::to_string(::getpid()));
    write_tiny_checkpoint((root_ / "a").string(), 7);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static fs::path root_;
};
fs::path TinyCheckpoint::root_;

TEST_F(TinyCheckpoint, SameSeedSameBytesOtherSeedOtherWeights) {
  write_tiny_checkpoint((root_ / "b").string(), 7);
  write_tiny_checkpoint((root_ / "c").string(), 8);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_EQ(read_file(root_ / "a" / f), read_file(root_ / "b" / f)) << f;
  EXPECT_NE(read_file(root_ / "a" / "model.safetensors"), read_file(root_ / "c" / "model.safetensors"));
  EXPECT_EQ(read_file(root_ / "a" / "config.json"), read_file(root_ / "c" / "config.json"));
}

TEST_F(TinyCheckpoint, HoldsEveryTensorOfTheSpecAndValidates) {
  const ModelConfig cfg = load_config((root_ / "a" / "config.json").string());
  const Checkpoint ckpt = Checkpoint::open((root_ / "a").string());
  EXPECT_NO_THROW(validate_checkpoint(ckpt, cfg));
  EXPECT_EQ(ckpt.tensors().size(), checkpoint_tensor_specs(cfg).size());
  // Quantized as the real checkpoint: FP8 dense, FP4 (I8) experts, ROWFP8 Engram, BF16 norms.
  EXPECT_EQ(ckpt.find("layers.0.attn.wq_a.weight")->dtype, DType::F8_E4M3);
  EXPECT_EQ(ckpt.find("layers.0.attn.wq_a.scale")->dtype, DType::F8_E8M0);
  EXPECT_EQ(ckpt.find("layers.0.ffn.experts.3.w2.weight")->dtype, DType::I8);
  EXPECT_EQ(ckpt.find("layers.1.engram.embed.weight")->dtype, DType::F8_E4M3);
  EXPECT_EQ(ckpt.find("norm.weight")->dtype, DType::BF16);
}

// The binder marks FP8 weights without NaN codes (WeightView::no_nan_codes, which lets
// the GEMMs skip their NaN test), and only those: a NaN code written into one weight's
// bytes in a copy of the file leaves that weight unmarked and every other marked.
TEST_F(TinyCheckpoint, MarksFp8WeightsWithoutNanCodes) {
  const ModelConfig cfg = load_config((root_ / "a" / "config.json").string());
  const fs::path copy = root_ / "nan";
  fs::create_directories(copy);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(root_ / "a" / f, copy / f, fs::copy_options::overwrite_existing);
  {
    const Checkpoint ckpt = Checkpoint::open((root_ / "a").string());
    const ModelWeights w = bind_weights(ckpt, cfg);
    EXPECT_TRUE(w.layers[0].attn.wq_a.no_nan_codes);
    EXPECT_TRUE(w.layers[1].attn.wo_b.no_nan_codes);
    EXPECT_FALSE(w.layers[0].ffn.experts[0].w1.no_nan_codes);  // FP4: the flag is FP8's
    // The byte's place in the file: the tensor's offset in the mapping of the same file.
    const TensorInfo& t = *ckpt.find("layers.1.attn.wo_b.weight");
    const TensorInfo& first =
        std::min_element(ckpt.tensors().begin(), ckpt.tensors().end(),
                         [](const auto& a, const auto& b) { return a.second.data < b.second.data; })
            ->second;
    const std::string bytes = read_file(root_ / "a" / "model.safetensors");
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    const int64_t offset = 8 + static_cast<int64_t>(header) + (t.data - first.data) + t.nbytes / 2;
    std::fstream f(copy / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.put(static_cast<char>(0xFF));
  }
  const Checkpoint ckpt = Checkpoint::open(copy.string());
  const ModelWeights w = bind_weights(ckpt, cfg);
  EXPECT_FALSE(w.layers[1].attn.wo_b.no_nan_codes);
  EXPECT_TRUE(w.layers[0].attn.wo_b.no_nan_codes);
  EXPECT_TRUE(w.layers[1].attn.wq_a.no_nan_codes);
}

TEST_F(TinyCheckpoint, RunsEndToEndWithItsTokenizer) {
  const ModelConfig cfg = load_config((root_ / "a" / "config.json").string());
  const Checkpoint ckpt = Checkpoint::open((root_ / "a").string());
  const ModelWeights w = bind_weights(ckpt, cfg);
  const Forward fwd(cfg, w);
  const Tokenizer tok = Tokenizer::load((root_ / "a" / "tokenizer.json").string());
  const std::vector<int32_t> ids = tok.encode("The quick brown fox", true);
  ASSERT_EQ(ids.front(), cfg.bos_token_id);
  SequenceState st = SequenceState::empty(cfg);
  SequenceInput in{&st, ids, true};
  const auto logits = fwd.run({&in, 1});
  ASSERT_EQ(logits[0].size(), ids.size() * cfg.vocab_size);
  for (float v : logits[0]) ASSERT_TRUE(std::isfinite(v));
  // Random weights give near-uniform but not constant logits.
  const auto [lo, hi] = std::minmax_element(logits[0].begin(), logits[0].end());
  EXPECT_LT(*lo, *hi);
}

}  // namespace
}  // namespace troupe::model
