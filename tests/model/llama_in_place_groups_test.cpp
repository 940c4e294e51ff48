// A LLaMA GGUF file's Q8_0 / Q4_0 matrices regrouped in place (model/llama_weights.cpp,
// the default where the GEMM reads row groups) against the route before it
// (TROUPE_Q8_ROW_GROUPS=copy: every matrix's groups in a copy beside its GGUF bytes), on
// the AVX-512 and the AVX2 path: the same logits bit for bit, at decode and at prefill
// rows (the AVX-512 prefill tiles), the matrices held once (their views keep only the
// groups, and the weights' row-group copy shrinks by their bytes), and a second load of the
// same file object refuses the rewritten tensors.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/dispatch.h"
#include "kernels/q8_row_groups.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/llama_ref.h"
#include "support/scoped_env.h"

namespace troupe::model {
namespace {

struct Case {
  const char* name;
  GgmlType type;
  bool tied;
  int64_t experts, top_k;
  kernels::CpuPath path;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const Case kCases[] = {
    {"Q8_0Avx512", GgmlType::Q8_0, false, 0, 0, kernels::CpuPath::Avx512},
    {"Q4_0TiedAvx512", GgmlType::Q4_0, true, 0, 0, kernels::CpuPath::Avx512},
    {"MoeQ4_0Avx512", GgmlType::Q4_0, false, 4, 2, kernels::CpuPath::Avx512},
    {"Q8_0Avx2", GgmlType::Q8_0, false, 0, 0, kernels::CpuPath::Avx2},
    {"MoeQ8_0TiedAvx2", GgmlType::Q8_0, true, 4, 2, kernels::CpuPath::Avx2},
};

// TROUPE_Q8_ROW_GROUPS for one load.
struct ScopedRowGroupsEnv : testing::ScopedEnv {
  explicit ScopedRowGroupsEnv(const char* v) : ScopedEnv("TROUPE_Q8_ROW_GROUPS", v) {}
};

class InPlaceGroups : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    if (!kernels::cpu_supports(c.path) || (c.path == kernels::CpuPath::Avx512 && !kernels::cpu_features().avx512vnni))
      GTEST_SKIP() << "no " << kernels::to_string(c.path) << " row-group kernel here";
    path_.emplace(c.path);  // held through the test: the loader's choices and every kernel
    testing::TinyLlamaSpec s;
    s.type = c.type, s.tied = c.tied, s.experts = c.experts, s.top_k = c.top_k, s.seed = 21;
    s.context = 128;  // room for a prefill above kGroupsDecodeMaxRows tokens
    testing::write_tiny_llama(s, dir_.file("m.gguf"));
    in_place_ = LlamaModel::load(dir_.file("m.gguf"));
    ScopedRowGroupsEnv copy("copy");
    copied_ = LlamaModel::load(dir_.file("m.gguf"));
  }
  std::optional<kernels::ScopedCpuPath> path_;
  test::TempDir dir_;
  std::unique_ptr<LlamaModel> in_place_, copied_;
};

std::vector<int32_t> prompt(int64_t n) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % 80));
  return t;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << what << ": logit " << i << " = " << got[i] << ", copy route " << want[i];
}

TEST_P(InPlaceGroups, LogitsAreTheCopyRoutesBitForBit) {
  for (int64_t n : {int64_t{7}, kernels::cpu::kGroupsDecodeMaxRows + 13}) {
    LlamaState a = LlamaState::empty(in_place_->config), b = LlamaState::empty(copied_->config);
    const std::vector<int32_t> tokens = prompt(n);
    expect_same_bits(in_place_->forward->run(a, tokens, /*all_logits=*/true),
                     copied_->forward->run(b, tokens, true), "prefill of " + std::to_string(n));
    for (int32_t next : {3, 41, 77})  // decode steps on the cache
      expect_same_bits(in_place_->forward->run(a, std::vector<int32_t>{next}, false),
                       copied_->forward->run(b, std::vector<int32_t>{next}, false), "decode after " + std::to_string(n));
  }
}

// Matrices whose rows are whole groups and that only a GEMM reads are held once (data
// null, groups in the file's bytes); the rest (the router's E rows, the tied embedding:
// its lookup reads GGUF rows) keep their GGUF bytes and a copy of the groups.
TEST_P(InPlaceGroups, MatricesAreHeldOnce) {
  const Case& c = GetParam();
  const LlamaWeights& w = in_place_->weights;
  const LlamaLayerWeights& l = w.layers[0];
  int64_t in_place_bytes = 0;
  for (const LlamaMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
    EXPECT_EQ(m->view().data, nullptr);
    ASSERT_NE(m->view().groups, nullptr);
    in_place_bytes += kernels::q8_row_groups_bytes(m->view());
  }
  EXPECT_EQ(w.output_view().data != nullptr, c.tied);
  EXPECT_NE(w.token_embd.view().data, nullptr);  // the lookup's rows
  if (c.experts > 0) {
    EXPECT_NE(l.router.view().data, nullptr);  // 4 rows: not a whole group
  }
  const int64_t layers = int64_t(w.layers.size());
  EXPECT_GT(copied_->weights.row_groups_bytes, 0);
  EXPECT_LE(w.row_groups_bytes + layers * in_place_bytes, copied_->weights.row_groups_bytes);
  for (const LlamaMatrix* m : {&copied_->weights.layers[0].wq, &copied_->weights.layers[0].down})
    EXPECT_NE(m->view().data, nullptr);
}

TEST_P(InPlaceGroups, ASecondLoadOfTheRewrittenFileIsRefused) {
  ASSERT_TRUE(in_place_->file.has_value());
  EXPECT_THROW(load_llama_weights(*in_place_->file, in_place_->config), Error);
}

INSTANTIATE_TEST_SUITE_P(Files, InPlaceGroups, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A file mapped from disk (TROUPE_GGUF_MMAP=1) is not this process's copy: its matrices
// keep the separate copy of their groups.
TEST(InPlaceGroupsFile, AFileMappingKeepsTheCopy) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path reads no row groups";
  test::TempDir dir;
  testing::TinyLlamaSpec s;
  s.type = GgmlType::Q8_0;
  testing::write_tiny_llama(s, dir.file("m.gguf"));
  ::setenv("TROUPE_GGUF_MMAP", "1", 1);
  std::unique_ptr<LlamaModel> m;
  try {
    m = LlamaModel::load(dir.file("m.gguf"));
  } catch (...) {
    ::unsetenv("TROUPE_GGUF_MMAP");
    throw;
  }
  ::unsetenv("TROUPE_GGUF_MMAP");
  EXPECT_FALSE(m->file->rewritable());
  EXPECT_NE(m->weights.layers[0].wq.view().data, nullptr);
  EXPECT_NE(m->weights.layers[0].wq.view().groups, nullptr);
  EXPECT_GT(m->weights.row_groups_bytes, 0);
}

}  // namespace
}  // namespace troupe::model
