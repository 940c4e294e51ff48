// checkpoint_tensor_specs() against the golden checkpoint and hand-worked shapes, and
// validate_checkpoint() on copies of the golden checkpoint with one tensor broken.
#include "model/tensor_spec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/check.h"
#include "model/engram_hash.h"
#include "tests/model/temp_dir.h"
#include "support/test_paths.h"

namespace troupe::model {
namespace {

const std::string kGoldenDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& specs) {
  std::map<std::string, TensorSpec> m;
  for (const auto& s : specs)
    EXPECT_TRUE(m.emplace(s.name, s).second) << "listed twice: " << s.name;
  return m;
}

TEST(TensorSpec, GoldenCheckpointHasExactlyTheListedTensors) {
  const ModelConfig c = load_config(kGoldenDir + "/config.json");
  const Checkpoint ckpt = Checkpoint::open(kGoldenDir);
  const auto specs = by_name(checkpoint_tensor_specs(c));
  EXPECT_EQ(specs.size(), ckpt.tensors().size());
  for (const auto& [name, t] : ckpt.tensors()) {
    auto it = specs.find(name);
    ASSERT_NE(it, specs.end()) << "in the checkpoint but not listed: " << name;
    EXPECT_EQ(t.shape, it->second.shape) << name;
    EXPECT_EQ(t.dtype, it->second.dtypes.front()) << name << ": writers write dtypes[0]";
  }
  EXPECT_NO_THROW(validate_checkpoint(ckpt, c));
}

TEST(TensorSpec, FlashShapesAndTags) {
  const auto specs = by_name(checkpoint_tensor_specs(preset_config("v41-flash")));
  auto shape = [&](const std::string& n) {
    auto it = specs.find(n);
    return it == specs.end() ? std::vector<int64_t>{-1} : it->second.shape;
  };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("layers.0.attn.wq_b.weight"), (S{32768, 1280}));
  EXPECT_EQ(shape("layers.0.attn.wq_b.scale"), (S{1024, 40}));
  EXPECT_EQ(shape("layers.0.attn.wo_a.weight"), (S{8192, 4096}));
  EXPECT_EQ(shape("layers.0.hc_attn_fn"), (S{24, 20480}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w1.weight"), (S{2304, 2560}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w1.scale"), (S{2304, 160}));
  EXPECT_EQ(shape("layers.39.ffn.experts.383.w2.weight"), (S{5120, 1152}));
  EXPECT_EQ(shape("layers.1.engram.embed.weight"), (S{384006168, 256}));
  EXPECT_EQ(shape("layers.14.engram.embed.scale"), (S{384016682, 8}));
  EXPECT_EQ(shape("layers.14.engram.wkv.weight"), (S{25600, 6144}));
  EXPECT_EQ(shape("layers.2.attn.compressor.wgate.weight"), (S{512, 5120}));
  EXPECT_EQ(shape("layers.20.attn.compressor.wgate.weight"), (S{-1}));  // ratio 1: no gate
  EXPECT_EQ(shape("layers.24.attn.indexer.wq_b.weight"), (S{4096, 1280}));
  EXPECT_EQ(shape("layers.24.attn.indexer.wk.weight"), (S{-1}));   // Reindex: no keys of its own
  EXPECT_EQ(shape("layers.3.attn.indexer.wq_b.weight"), (S{-1}));  // Reuse: no indexer
  EXPECT_EQ(shape("mtp.0.main_proj.weight"), (S{5120, 15360}));
  EXPECT_EQ(shape("mtp.2.main_proj.weight"), (S{-1}));
  EXPECT_EQ(shape("mtp.2.confidence_head.proj.weight"), (S{1, 5376}));
  EXPECT_EQ(shape("mtp.1.ffn.experts.127.w3.weight"), (S{2304, 2560}));
  EXPECT_EQ(shape("mtp.1.ffn.experts.128.w3.weight"), (S{-1}));
  EXPECT_EQ(shape("engram.multipliers"), (S{2, 4}));

  const TensorSpec& e = specs.at("layers.5.ffn.experts.7.w2.scale");
  EXPECT_EQ(e.layer, 5);
  EXPECT_EQ(e.expert, 7);
  EXPECT_EQ(e.stage, -1);
  EXPECT_EQ(e.format, TensorFormat::Scale);
  EXPECT_EQ(e.dtypes, (std::vector<DType>{DType::F8_E8M0, DType::U8}));
  const TensorSpec& d = specs.at("mtp.1.ffn.experts.3.w1.weight");
  EXPECT_EQ(d.stage, 1);
  EXPECT_EQ(d.layer, -1);
  EXPECT_EQ(d.format, TensorFormat::Fp4);
  EXPECT_EQ(d.params(), 2304 * 5120);
  EXPECT_EQ(d.dtypes, (std::vector<DType>{DType::I8, DType::U8}));
  EXPECT_TRUE(specs.at("layers.14.engram.embed.weight").engram_table);
  EXPECT_FALSE(specs.at("layers.14.engram.wkv.weight").engram_table);
}

TEST(TensorSpec, Fp8ScalesRoundUpRaggedEdges) {
  nlohmann::json j = nlohmann::json::parse(config_to_json(preset_config("v41-tiny")));
  j["q_lora_rank"] = 100;  // not a multiple of 32: the last 32x32 scale block is partial
  const auto specs = by_name(checkpoint_tensor_specs(parse_config(j.dump())));
  EXPECT_EQ(specs.at("layers.0.attn.wq_a.weight").shape, (std::vector<int64_t>{100, 256}));
  EXPECT_EQ(specs.at("layers.0.attn.wq_a.scale").shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(specs.at("layers.0.attn.wq_b.scale").shape, (std::vector<int64_t>{16, 4}));
}

TEST(TensorSpec, TableSizesMustEqualPrimeSums) {
  nlohmann::json j =
      nlohmann::json::parse(config_to_json(load_config(kGoldenDir + "/config.json")));
  j["engram_num_embeddings"] = {20022, 20135};
  const Checkpoint ckpt = Checkpoint::open(kGoldenDir);
  try {
    validate_checkpoint(ckpt, parse_config(j.dump()));
    FAIL() << "a table size off by one validated";
  } catch (const Error& e) {
    const std::string err = e.what();
    EXPECT_NE(err.find("'engram_num_embeddings': entry 1 (layer 4) is 20135"), std::string::npos)
        << err;
    EXPECT_NE(err.find("20134"), std::string::npos) << err;
  }
}

TEST(TensorSpec, PresetTableSizesArePrimeSums) {
  for (const char* name : {"v41-tiny", "v41-flash"}) {
    const ModelConfig c = preset_config(name);
    EXPECT_EQ(engram_num_embeddings(c), c.engram_num_embeddings) << name;
  }
}

// Copies of the golden checkpoint: every tensor but the victims in one shared file
// (symlinked into each case folder), the victims, possibly altered, in a second file.
class BrokenCheckpoint : public ::testing::Test {
 protected:
  static inline const std::set<std::string> kVictims{"layers.3.attn.indexer.wq_b.scale",
                                                     "mtp.2.markov_head.head.weight",
                                                     "layers.6.attn.compressor.wkv.weight",
                                                     "layers.1.engram.embed.weight",
                                                     "engram.token_map",
                                                     "engram.multipliers",
                                                     "layers.0.attn.wkv.scale",
                                                     "layers.0.ffn.experts.0.w1.weight"};
  static inline std::unique_ptr<test::TempDir> shared_;
  static inline std::unique_ptr<Checkpoint> golden_;

  static void SetUpTestSuite() {
    shared_ = std::make_unique<test::TempDir>();
    golden_ = std::make_unique<Checkpoint>(Checkpoint::open(kGoldenDir));
    SafetensorsWriter rest;
    for (const auto& [name, t] : golden_->tensors())
      if (!kVictims.count(name)) rest.add(name, t.dtype, t.shape, {t.data, t.data + t.nbytes});
    rest.write(shared_->file("rest.safetensors"));
  }
  static void TearDownTestSuite() {
    golden_.reset();
    shared_.reset();
  }

  struct Victim {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  using Edit = std::function<void(std::map<std::string, Victim>&)>;

  // The message validate_checkpoint gives for the golden checkpoint with edit applied ("" = valid).
  std::string validate_with(const Edit& edit) {
    std::map<std::string, Victim> v;
    for (const auto& name : kVictims) {
      const TensorInfo& t = *golden_->find(name);
      v[name] = {name, t.dtype, t.shape, {t.data, t.data + t.nbytes}};
    }
    edit(v);
    test::TempDir dir;
    std::filesystem::create_symlink(shared_->file("rest.safetensors"),
                                    dir.file("rest.safetensors"));
    SafetensorsWriter w;
    for (const auto& [key, t] : v) w.add(t.name, t.dtype, t.shape, t.bytes);
    w.write(dir.file("victims.safetensors"));
    try {
      validate_checkpoint(Checkpoint::open(dir.path()), load_config(kGoldenDir + "/config.json"));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

template <class T>
void poke(std::vector<uint8_t>& bytes, size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

TEST_F(BrokenCheckpoint, UnchangedCopyValidatesAndU8IsAcceptedForScalesAndFp4) {
  EXPECT_EQ(validate_with([](auto&) {}), "");
  EXPECT_EQ(validate_with([](auto& v) {
              v["layers.0.attn.wkv.scale"].dtype = DType::U8;
              v["layers.0.ffn.experts.0.w1.weight"].dtype = DType::U8;
            }),
            "");
}

TEST_F(BrokenCheckpoint, EachBrokenTensorIsNamed) {
  struct Case {
    const char* what;
    Edit edit;
    const char* expect;
  };
  const Case cases[] = {
      {"removed", [](auto& v) { v.erase("layers.3.attn.indexer.wq_b.scale"); },
       "'layers.3.attn.indexer.wq_b.scale' is missing"},
      {"renamed",
       [](auto& v) { v["mtp.2.markov_head.head.weight"].name = "mtp.2.markov_head.head.weights"; },
       "'mtp.2.markov_head.head.weight' is missing"},
      {"wrong dtype",
       [](auto& v) {
         auto& t = v["layers.6.attn.compressor.wkv.weight"];
         t.dtype = DType::BF16;
         t.bytes.resize(t.bytes.size() / 2);
       },
       "'layers.6.attn.compressor.wkv.weight': expected F32 [128, 256], found BF16 [128, 256]"},
      {"wrong shape",
       [](auto& v) {
         auto& t = v["layers.1.engram.embed.weight"];
         t.shape[0] -= 1;
         t.bytes.resize(t.bytes.size() - 32);
       },
       "'layers.1.engram.embed.weight': expected F8_E4M3 [20022, 32], found F8_E4M3 [20021, 32]"},
      {"I8 scale", [](auto& v) { v["layers.0.attn.wkv.scale"].dtype = DType::I8; },
       "'layers.0.attn.wkv.scale': expected F8_E8M0 or U8"},
      {"token id >= cV", [](auto& v) { poke<int32_t>(v["engram.token_map"].bytes, 17, 4096); },
       "'engram.token_map': entry 17 = 4096"},
      {"negative token id", [](auto& v) { poke<int32_t>(v["engram.token_map"].bytes, 0, -1); },
       "'engram.token_map': entry 0 = -1"},
      {"multiplier 0", [](auto& v) { poke<int64_t>(v["engram.multipliers"].bytes, 4, 0); },
       "'engram.multipliers': entry [1][1] = 0"},
      {"multiplier over bound",
       [](auto& v) {
         poke<int64_t>(v["engram.multipliers"].bytes, 2,
                       std::numeric_limits<int64_t>::max() / 4096 + 1);
       },
       "'engram.multipliers': entry [0][2]"},
  };
  for (const auto& c : cases) {
    const std::string err = validate_with(c.edit);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": '" << err << "'";
  }
  // The bound itself is allowed.
  EXPECT_EQ(validate_with([](auto& v) {
              poke<int64_t>(v["engram.multipliers"].bytes, 2,
                            std::numeric_limits<int64_t>::max() / 4096);
            }),
            "");
}

}  // namespace
}  // namespace troupe::model
