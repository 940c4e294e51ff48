// PagedKvStorage's piece-major KV rows (model/kv_rows.h: ckv_pieces): a row appended
// whole lands piece by piece, piece p of a block's rows side by side in run p, and
// PagedSequence reads it back through ckv_row + p · ckv_piece_stride. Checked against
// the byte offsets written out here from the layout, over a shuffled block table; one
// piece keeps whole rows one after another, and a row that does not split is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/check.h"
#include "runtime/kv_cache/paged_kv.h"

namespace troupe::runtime {
namespace {

constexpr int64_t kBlock = 4, kLayers = 2, kRowFloats = 12;

model::ServingShape shape(int64_t pieces) {
  model::ServingShape s;
  s.layers = kLayers;
  s.ratio.assign(kLayers, 1);
  s.holds_rows.assign(kLayers, 1);
  s.rows = {
      {model::RowFormat::F32, 0}, {model::RowFormat::F32, kRowFloats}, {model::RowFormat::F32, 0}};
  s.rows.ckv_pieces = pieces;
  return s;
}

// Token j's row of layer l: distinct floats, so a piece in the wrong place shows.
std::vector<float> row_of(int64_t l, int64_t j) {
  std::vector<float> r(kRowFloats);
  for (int64_t i = 0; i < kRowFloats; ++i) r[size_t(i)] = float(1000 * l + 100 * j + i);
  return r;
}

class PagedKvPieces : public ::testing::TestWithParam<int64_t> {};

TEST_P(PagedKvPieces, RowsLandPieceMajorAndReadBack) {
  const int64_t pieces = GetParam(), piece = kRowFloats / pieces, rows = 7;
  PagedKvStorage st(shape(pieces), kBlock, 4, 1);
  const std::vector<int32_t> table = {3, 1};  // rows 0-3 in block 3, 4-6 in block 1
  PagedSequence seq(st, table, 0, {}, 0, 0);
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t l = 0; l < kLayers; ++l)
      seq.append_row(l, reinterpret_cast<const uint8_t*>(row_of(l, j).data()), nullptr);
  const int64_t layer_bytes = kBlock * kRowFloats * 4;
  ASSERT_EQ(st.block_bytes(), kLayers * layer_bytes);
  for (int64_t l = 0; l < kLayers; ++l) {
    ASSERT_EQ(seq.compressed_rows(l), rows);
    // Between pieces: a block's run of them (with one piece, never stepped).
    ASSERT_EQ(seq.ckv_piece_stride(l), kBlock * piece * 4);
    for (int64_t j = 0; j < rows; ++j) {
      const std::vector<float> want = row_of(l, j);
      const auto block = st.block_data(table[size_t(j / kBlock)]);
      for (int64_t p = 0; p < pieces; ++p) {
        // Where the layout puts piece p of row j: run p of the layer's rows in its block.
        const int64_t at = l * layer_bytes + (p * kBlock + j % kBlock) * piece * 4;
        ASSERT_EQ(0, std::memcmp(block.data() + at, want.data() + p * piece, size_t(piece * 4)))
            << "layer " << l << " row " << j << " piece " << p;
        ASSERT_EQ(seq.ckv_row(l, j) + p * seq.ckv_piece_stride(l), block.data() + at);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pieces, PagedKvPieces, ::testing::Values(1, 2, 6));

TEST(PagedKvPieces, ARowThatDoesNotSplitIsRefused) {
  EXPECT_THROW(PagedKvStorage(shape(5), kBlock, 2, 1), Error);
  EXPECT_THROW(PagedKvStorage(shape(0), kBlock, 2, 1), Error);
}

}  // namespace
}  // namespace troupe::runtime
