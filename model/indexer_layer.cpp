// The CSA2 indexer of a Full/Reindex layer (MODEL.md §5.4), per row of the batch:
//   qi_h = mxfp4(rope(indexer.wq_b · ql)_h),  w_h = (weights_proj · x)_h / sqrt(dI·nI)
//   score[j] = Σ_h relu(qi_h · iK[j]) · w_h over the visible rows j < (p+1) div r
// Layer cs (level 1) also picks candidate blocks; Reindex layers after cs (level 2)
// score only those candidates.
#include <cmath>
#include <limits>

#include "kernels/indexer.h"
#include "kernels/quant.h"
#include "model/csa.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Level 1: candidate rows = the visible rows of the top Kb blocks by block max; the
// block of the newest visible row is always kept (+inf).
scratch_vector<int32_t> candidate_rows(const ModelConfig& c, const float* score, int64_t visible) {
  const int64_t Bc = c.candidate_block_size;
  const int64_t blocks = (visible + Bc - 1) / Bc;
  if (blocks == 0) return {};
  scratch_vector<float> block_max(blocks, -kInf);
  for (int64_t j = 0; j < visible; ++j) block_max[j / Bc] = std::max(block_max[j / Bc], score[j]);
  block_max[(visible - 1) / Bc] = kInf;
  scratch_vector<int32_t> picked(blocks);
  const int64_t n = kernels::topk(block_max.data(), blocks,
                                  std::min(c.candidate_topk_blocks, blocks), picked.data());
  scratch_vector<char> keep(blocks, 0);
  for (int64_t i = 0; i < n; ++i) keep[picked[i]] = 1;
  scratch_vector<int32_t> rows;
  for (int64_t j = 0; j < visible; ++j)
    if (keep[j / Bc]) rows.push_back(static_cast<int32_t>(j));
  return rows;
}

scratch_vector<int32_t> top_rows(const ModelConfig& c, const float* score, int64_t n) {
  scratch_vector<int32_t> out(std::min(c.index_topk, n));
  out.resize(kernels::topk(score, n, static_cast<int64_t>(out.size()), out.data()));
  return out;
}

void trace_selection(const Batch& b, int64_t layer, int64_t row, const float* score, int64_t n,
                     const scratch_vector<int32_t>& sel) {
  if (!b.trace || !*b.trace) return;
  (*b.trace)("index_score", layer, row, {score, static_cast<size_t>(n)});
  scratch_vector<float> mark(n, -1.0f);
  for (int32_t j : sel) mark[j] = static_cast<float>(j);
  (*b.trace)("sel", layer, row, mark);
}

// Every index key of the source layer as f32 [rows, dI]. The indexer scores the
// whole visible context, so all rows are needed.
scratch_vector<float> decode_index_keys(const KvStore& seq, int64_t src) {
  const RowCodec& codec = seq.rows().ikey;
  const int64_t n = seq.compressed_rows(src);
  scratch_vector<float> keys(n * codec.dim);
  for (int64_t j = 0; j < n; ++j) codec.decode(seq.ikey_row(src, j), &keys[j * codec.dim]);
  return keys;
}

}  // namespace

void run_indexer(const LayerContext& ctx, const float* x, const float* ql, Selections& sel) {
  const ModelConfig& c = ctx.cfg;
  const IndexerWeights& iw = ctx.w.indexer;
  const Batch& b = ctx.batch;
  const int64_t nI = c.index_n_heads, dI = c.index_head_dim, r = c.ratio(ctx.layer);
  const int64_t src = c.kv_source[ctx.layer], cs = c.candidate_source_layer_id;
  const bool level1 = ctx.layer == cs, level2 = cs >= 0 && ctx.layer > cs;

  scratch_vector<float> qi = linear(ql, b.rows, iw.wq_b);
  rope_rows(qi.data(), b.rows * nI, dI, c.qk_rope_head_dim, b.pos.data(), nI, ctx.freqs);
  for (int64_t v = 0; v < b.rows * nI; ++v) kernels::fake_quant_mxfp4(&qi[v * dI], dI);
  scratch_vector<float> wts = linear(x, b.rows, iw.weights_proj);
  const float wscale = 1.0f / std::sqrt(static_cast<float>(dI)) / std::sqrt(static_cast<float>(nI));
  for (float& v : wts) v *= wscale;

  auto& layer_sel = sel.sel[ctx.layer];
  layer_sel.assign(b.rows, {});
  if (level1) sel.cand.assign(b.rows, {});
  for (int64_t s = 0; s < b.seqs(); ++s) {
    if (b.rows_of(s) == 0) continue;
    const scratch_vector<float> keys = decode_index_keys(*b.states[s], src);
    const int64_t nk = static_cast<int64_t>(keys.size()) / dI;
    const int64_t r0 = b.begin[s], m = b.begin[s + 1] - r0;
    scratch_vector<int64_t> visible(m);
    for (int64_t i = 0; i < m; ++i) visible[i] = (b.pos[r0 + i] + 1) / r;
    scratch_vector<int32_t> cands;
    int64_t max_cand = 1;  // at least one slot: a null list would mean "no restriction"
    if (level2) {
      for (int64_t i = 0; i < m; ++i)
        max_cand = std::max<int64_t>(max_cand, sel.cand[r0 + i].size());
      cands.assign(m * max_cand, -1);
      for (int64_t i = 0; i < m; ++i)
        std::copy(sel.cand[r0 + i].begin(), sel.cand[r0 + i].end(), &cands[i * max_cand]);
    }
    scratch_vector<float> score(m * std::max<int64_t>(nk, 1));
    kernels::IndexerScoreParams p;
    p.q = &qi[r0 * nI * dI];
    p.w = &wts[r0 * nI];
    p.keys = keys.data();
    p.visible = visible.data();
    p.candidates = level2 ? cands.data() : nullptr;
    p.max_candidates = max_cand;
    p.score = score.data();
    p.m = m;
    p.heads = nI;
    p.dim = dI;
    p.rows = nk;
    if (nk > 0) kernels::indexer_score(p);
    for (int64_t i = 0; i < m; ++i) {
      const float* sc = &score[i * nk];
      if (level1) sel.cand[r0 + i] = candidate_rows(c, sc, visible[i]);
      layer_sel[r0 + i] = top_rows(c, sc, nk);
      trace_selection(b, ctx.layer, r0 + i, sc, nk, layer_sel[r0 + i]);
    }
  }
}

}  // namespace troupe::model
