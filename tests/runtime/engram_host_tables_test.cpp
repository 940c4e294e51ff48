// The node's Engram tables in one shared host mapping (runtime/engram): the mapping is
// shared (a second mapping of its fd sees the same bytes), the adopted tables are the
// checkpoint's byte for byte and the forward pass reads them there with unchanged
// logits, and the rows a plan will read are exactly the hashed n-grams of its known
// positions (an independent recomputation from the whole token sequence).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <set>

#include "runtime/engram/engram_host_tables.h"
#include "support/golden.h"

namespace troupe::runtime {
namespace {

using testing::golden_model;
using testing::random_tokens;

TEST(SharedHostMapping, IsSharedThroughItsFd) {
  SharedHostMapping m = SharedHostMapping::create(1000, "troupe-test", /*try_huge=*/false);
  ASSERT_NE(m.data(), nullptr);
  EXPECT_GE(m.size(), 1000u);
  EXPECT_EQ(m.size() % m.page_size(), 0u);
  ASSERT_GE(m.fd(), 0) << m.describe();
  for (size_t i = 0; i < 1000; ++i) m.data()[i] = std::byte(i * 7);
  // What another process of the node does with the fd: map it again.
  void* again = ::mmap(nullptr, m.size(), PROT_READ, MAP_SHARED, m.fd(), 0);
  ASSERT_NE(again, MAP_FAILED);
  EXPECT_EQ(std::memcmp(again, m.data(), 1000), 0);
  m.data()[5] = std::byte(0xAB);
  EXPECT_EQ(static_cast<const std::byte*>(again)[5], std::byte(0xAB));
  ::munmap(again, m.size());
  SharedHostMapping moved = std::move(m);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(moved.data()[5], std::byte(0xAB));
}

TEST(SharedHostMapping, UsesHugePagesOnlyWhenGrantedAndSaysWhich) {
  SharedHostMapping m = SharedHostMapping::create(3 << 20, "troupe-test-huge");
  ASSERT_NE(m.data(), nullptr);
  if (m.page_size() == size_t(2) << 20) {
    EXPECT_EQ(m.describe(), "2 MiB huge pages (hugetlb)");
    EXPECT_EQ(m.size(), size_t(4) << 20);
  } else {
    EXPECT_NE(m.describe().find("no hugetlb pages granted"), std::string::npos) << m.describe();
  }
  std::memset(m.data(), 1, m.size());  // every page is there (hugetlb reserved at mmap)
  EXPECT_EQ(m.data()[m.size() - 1], std::byte(1));
}

TEST(EngramHostTables, HoldTheCheckpointsTablesAndTheForwardReadsThemThere) {
  const auto& g = golden_model();
  std::unique_ptr<testing::GoldenModel> own(testing::load_golden_model(testing::Golden::kSeed7));
  const auto tables = EngramHostTables::adopt(own->weights, own->config);
  ASSERT_NE(tables, nullptr);
  ASSERT_EQ(tables->layers(), static_cast<int64_t>(g.config.engram_layer_ids.size()));
  const std::byte* lo = tables->mapping().data();
  const std::byte* hi = lo + tables->mapping().size();
  int64_t bytes = 0;
  for (int64_t e = 0; e < tables->layers(); ++e) {
    const int64_t l = g.config.engram_layer_ids[e];
    const kernels::WeightView& src = g.weights.layers[l].engram.embed;
    const kernels::WeightView& got = own->weights.layers[l].engram.embed;
    ASSERT_EQ(got.data, tables->table(e).data);
    const auto* d = static_cast<const std::byte*>(got.data);
    const auto* sc = reinterpret_cast<const std::byte*>(got.scale);
    EXPECT_TRUE(d >= lo && d < hi && sc >= lo && sc < hi) << "layer " << l << " not in the mapping";
    EXPECT_EQ(std::memcmp(got.data, src.data, kernels::data_bytes(src)), 0);
    EXPECT_EQ(std::memcmp(got.scale, src.scale, kernels::scale_bytes(src)), 0);
    bytes += kernels::data_bytes(src) + kernels::scale_bytes(src);
  }
  EXPECT_EQ(tables->table_bytes(), bytes);
  const std::vector<int32_t> prompt = random_tokens(40, 3);
  auto run = [&](const model::Forward& f) {
    model::SequenceState st = model::SequenceState::empty(g.config);
    std::vector<model::SequenceInput> in{{&st, prompt, true}};
    return f.run(in)[0];
  };
  EXPECT_TRUE(run(*own->forward) == run(*g.forward));
}

// Reference: the ids of position p from the whole sequence (pad before position 0).
std::set<int64_t> rows_at(const model::ModelWeights& w, const model::ModelConfig& c,
                          const model::EngramHashTables& h, int64_t e,
                          const std::vector<int32_t>& seq, int64_t p) {
  const int64_t N = c.engram_max_ngram_size, nG = c.engram_n_heads * (N - 1);
  std::vector<int64_t> ctok(N), ids(nG);
  for (int64_t k = 0; k < N; ++k)
    ctok[k] = p - k < 0 ? w.engram_token_map[c.engram_pad_token_id] : w.engram_token_map[seq[p - k]];
  model::engram_hash_ids(h, e, ctok.data(), w.layers[c.engram_layer_ids[e]].engram.multipliers.data(),
                         ids.data());
  return {ids.begin(), ids.end()};
}

TEST(EngramRowsOfPlan, AreTheHashedNgramsOfEveryKnownPosition) {
  const auto& g = golden_model();
  const model::EngramHashTables h = model::engram_hash_tables(g.config);
  const std::vector<int32_t> a = random_tokens(20, 5), b = random_tokens(16, 6);
  StepPlan plan;
  ScheduledChunk first;  // a prefill from 0
  first.start = 0;
  first.token_ids.assign(a.begin(), a.begin() + 9);
  plan.chunks.push_back(first);
  ScheduledChunk later;  // a chunk at 12 with its lookback and a placeholder last token
  later.start = 12;
  later.lookback.assign(b.begin() + 9, b.begin() + 12);
  later.token_ids = {b[12], b[13], kPlaceholderToken};
  plan.chunks.push_back(later);
  const auto got = engram_rows_of_plan(g.config, g.weights, h, plan);
  ASSERT_EQ(got.size(), g.config.engram_layer_ids.size());
  for (int64_t e = 0; e < static_cast<int64_t>(got.size()); ++e) {
    std::set<int64_t> want;
    for (int64_t p = 0; p < 9; ++p) want.merge(rows_at(g.weights, g.config, h, e, a, p));
    for (int64_t p = 12; p < 14; ++p) want.merge(rows_at(g.weights, g.config, h, e, b, p));
    EXPECT_EQ(std::set<int64_t>(got[e].begin(), got[e].end()), want) << "layer " << e;
    EXPECT_TRUE(std::is_sorted(got[e].begin(), got[e].end()));
    EXPECT_EQ(got[e].size(), want.size()) << "duplicates";
  }
  std::unique_ptr<testing::GoldenModel> own(testing::load_golden_model(testing::Golden::kSeed7));
  const auto tables = EngramHostTables::adopt(own->weights, own->config, false);
  int64_t n = 0;
  for (const auto& r : got) n += static_cast<int64_t>(r.size());
  EXPECT_EQ(tables->prefetch(got), n);
}

}  // namespace
}  // namespace troupe::runtime
