// CSA2 attention of one layer (MODEL.md §5.3) over the batch:
//
//   ql  = RMSNorm(wq_a·x);  q_h = rope(wq_b·ql)_h
//   kvw = fp8_ue8m0(rope(RMSNorm(wkv·x)))            -> this layer's window row at p
//   keys(p) = window rows [max(0, p-W+1), p]  ++  cKV_src[j] for j in sel(p)
//   o_h = inverse_rope(sink-attention(q_h, keys));  out = wo_b · [wo_a_g · o_group_g]_g
//
// Window rows of this chunk live in a scratch buffer until the layer is done; rows
// before the chunk come from the state ring (slot = p mod W).
#include <bit>
#include <cmath>
#include <optional>

#include "kernels/attention.h"
#include "kernels/check.h"
#include "model/csa.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

// Window rows of this chunk: fp8_ue8m0(rope(RMSNorm(wkv·x), p)), packed [rows, row bytes]
// for the ring and decoded [rows, D] for this layer's queries.
struct ChunkWindow {
  scratch_vector<uint8_t> packed;
  scratch_vector<float> rows;
};

ChunkWindow window_rows(const LayerContext& ctx, const float* x) {
  const ModelConfig& c = ctx.cfg;
  const Batch& b = ctx.batch;
  const int64_t D = c.head_dim;
  scratch_vector<float> kv = linear(x, b.rows, ctx.w.wkv);
  rms_norm_rows(kv.data(), b.rows, D, ctx.w.kv_norm, c.rms_norm_eps);
  rope_rows(kv.data(), b.rows, D, c.qk_rope_head_dim, b.pos.data(), 1, ctx.freqs);
  const RowCodec codec = KvRowLayout::of(c).window;
  ChunkWindow w{scratch_vector<uint8_t>(b.rows * codec.bytes()), scratch_vector<float>(b.rows * D)};
  for (int64_t r = 0; r < b.rows; ++r) {
    codec.encode(&kv[r * D], &w.packed[r * codec.bytes()]);
    codec.decode(&w.packed[r * codec.bytes()], &w.rows[r * D]);
  }
  return w;
}

// The compressed rows a row attends to: its own indexer's choice, or its top-k source's.
const scratch_vector<int32_t>* selected_rows(const LayerContext& ctx, const Selections& sel,
                                          int64_t row) {
  switch (ctx.cfg.layer_mode[ctx.layer]) {
    case LayerMode::Swa: return nullptr;
    case LayerMode::Full:
    case LayerMode::Reindex: return &sel.sel[ctx.layer][row];
    case LayerMode::Reuse: return &sel.sel[ctx.cfg.topk_source[ctx.layer]][row];
  }
  return nullptr;
}

// f32 copies of the packed rows one sequence's queries read in this layer: the ring
// rows before the chunk, and each distinct selected compressed row once (at most
// max_compressed of them: the buffer is reserved once, so row addresses stay put).
// Which rows are decoded is an open-addressing table sized by that bound, not by the
// context: a long context costs no per-step pass over a slot per compressed row, and a
// decode step's buffers keep their sizes as the context grows (no heap allocation).
class DecodedRows {
 public:
  DecodedRows(KvStore& seq, int64_t layer, int64_t src, int64_t W, int64_t max_compressed)
      : seq_(seq), src_(src), dim_(seq.rows().ckv.dim), ring_pos_(W) {
    const RowCodec& wc = seq.rows().window;
    ring_.resize(W * wc.dim);
    for (int64_t slot = 0; slot < W; ++slot) {
      ring_pos_[slot] = seq.window_pos(layer, slot);
      if (ring_pos_[slot] >= 0) wc.decode(seq.window_row(layer, slot), &ring_[slot * wc.dim]);
    }
    if (src < 0) return;
    // At most the selections' count and the rows the context holds, the latter rounded
    // up to a power of two: a chunk of many queries (prefill) reserves no more than its
    // context, and a decode step's sizes change only when its context doubles, until
    // they settle at the selections' count ((k + 1) · index_topk rows).
    const auto held = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(seq.compressed_rows(src))));
    const int64_t most = std::min(max_compressed, held);
    compressed_.reserve(most * dim_);
    table_.assign(std::bit_ceil(static_cast<uint64_t>(2 * most + 1)), Entry{});  // at most half full
  }
  // The ring row of position q, or null when the ring does not hold it (§6: skipped).
  const float* ring_row(int64_t q) const {
    const size_t slot = q % ring_pos_.size();
    return ring_pos_[slot] == q ? &ring_[slot * dim_] : nullptr;
  }
  const float* compressed_row(int32_t j) {
    Entry& e = entry(j);
    if (e.row < 0) {
      TROUPE_CHECK(compressed_.size() + dim_ <= compressed_.capacity(),
                   "attention: more distinct compressed rows than reserved");
      e = {j, static_cast<int32_t>(compressed_.size() / dim_)};
      compressed_.resize(compressed_.size() + dim_);
      seq_.rows().ckv.decode(seq_.ckv_row(src_, j), &compressed_[e.slot * dim_]);
    }
    return &compressed_[e.slot * dim_];
  }

 private:
  struct Entry {
    int32_t row = -1;  // compressed row id; -1: empty
    int32_t slot = 0;  // its place in compressed_
  };
  // Row j's entry, or the empty one where it would go (linear probing; the table is never
  // more than half full, so a probe ends).
  Entry& entry(int32_t j) {
    const size_t mask = table_.size() - 1;
    for (size_t h = (static_cast<uint32_t>(j) * 2654435761u) & mask;; h = (h + 1) & mask)
      if (table_[h].row == j || table_[h].row < 0) return table_[h];
  }

  const KvStore& seq_;
  int64_t src_, dim_;
  scratch_vector<int64_t> ring_pos_;
  scratch_vector<float> ring_;
  scratch_vector<Entry> table_;
  scratch_vector<float> compressed_;  // [rows decoded, dim], never reallocated
};

// keys[queries, max_keys]: row pointers into the chunk's window rows (all rows of the
// layer's batch), the ring (positions before the chunk) and the selected cKV rows.
scratch_vector<const float*> gather_keys(const LayerContext& ctx, const Batch& queries,
                                      const Selections& sel, const ChunkWindow& win,
                                      int64_t max_keys,
                                      scratch_vector<std::optional<DecodedRows>>& decoded) {
  const ModelConfig& c = ctx.cfg;
  const Batch& chunk = ctx.batch;
  const int64_t D = c.head_dim, W = c.sliding_window;
  const int64_t src = c.layer_mode[ctx.layer] == LayerMode::Swa ? -1 : c.kv_source[ctx.layer];
  decoded.resize(queries.seqs());
  for (int64_t s = 0; s < queries.seqs(); ++s) {
    if (queries.rows_of(s) == 0) continue;
    int64_t selected = 0;  // bounds the distinct compressed rows the sequence reads
    for (int64_t row = queries.begin[s]; row < queries.begin[s + 1]; ++row)
      if (const auto* rows = selected_rows(ctx, sel, row)) selected += static_cast<int64_t>(rows->size());
    decoded[s].emplace(*queries.states[s], ctx.layer, src, W, selected);
  }
  scratch_vector<const float*> keys(queries.rows * max_keys, nullptr);
  for (int64_t row = 0; row < queries.rows; ++row) {
    const int64_t s = queries.seq[row], p = queries.pos[row], P = chunk.chunk_start(s);
    const float** k = &keys[row * max_keys];
    for (int64_t q = std::max<int64_t>(0, p - W + 1); q <= p; ++q) {
      const float* key = q >= P ? &win.rows[(chunk.begin[s] + q - P) * D] : decoded[s]->ring_row(q);
      if (key) *k++ = key;
    }
    if (const auto* rows = selected_rows(ctx, sel, row))
      for (int32_t j : *rows) *k++ = decoded[s]->compressed_row(j);
  }
  return keys;
}

// Writes the chunk's window rows into each sequence's ring (last W positions only).
void store_window(const LayerContext& ctx, const ChunkWindow& win) {
  const Batch& b = ctx.batch;
  const int64_t W = ctx.cfg.sliding_window;
  for (int64_t s = 0; s < b.seqs(); ++s) {
    const int64_t r0 = b.begin[s], r1 = b.begin[s + 1];
    KvStore& st = *b.states[s];
    const int64_t bytes = st.rows().window.bytes();
    const int64_t from = b.store_window_from.empty() ? 0 : b.store_window_from[s];
    for (int64_t row = std::max(r0, r1 - W); row < r1; ++row) {
      if (b.pos[row] < from) continue;
      const int64_t slot = b.pos[row] % W;
      std::copy_n(&win.packed[row * bytes], bytes, st.window_row(ctx.layer, slot));
      st.window_pos(ctx.layer, slot) = b.pos[row];
    }
  }
}

void trace_reuse(const LayerContext& ctx, const Batch& b, const Selections& sel) {
  if (!b.trace || !*b.trace || ctx.cfg.layer_mode[ctx.layer] != LayerMode::Reuse) return;
  const int64_t src = ctx.cfg.kv_source[ctx.layer];
  for (int64_t row = 0; row < b.rows; ++row) {
    const int64_t n = b.states[b.seq[row]]->compressed_rows(src);
    scratch_vector<float> mark(n, -1.0f);
    for (int32_t j : *selected_rows(ctx, sel, row)) mark[j] = static_cast<float>(j);
    (*b.trace)("sel", ctx.layer, row, mark);
  }
}

}  // namespace

void attention_output(const ModelConfig& c, const AttentionWeights& w, int64_t rows,
                      const float* o, float* out) {
  if (rows == 0) return;  // an empty decoder tail (§6): nothing to project, no &u[0]
  const int64_t G = c.o_groups, O = c.o_lora_rank;
  const int64_t width = c.num_attention_heads * c.head_dim, group_width = width / G;
  scratch_vector<float> u(rows * G * O);
  // The G group projections are independent GEMMs: one kernels call, one fork-join at decode.
  scratch_vector<kernels::GemmParams> groups(G);
  for (int64_t g = 0; g < G; ++g) {
    kernels::GemmParams& p = groups[g];
    p.x = o + g * group_width;
    p.w = row_slice(w.wo_a, g * O, O);
    p.y = &u[g * O];
    p.m = rows;
    p.ldx = width;
    p.ldy = G * O;
  }
  kernels::gemm_grouped(groups);
  linear(u.data(), rows, w.wo_b, out);
}

void attention_layer(const LayerContext& ctx, const float* x, const Batch& queries,
                     const float* xq, Selections& sel, float* out) {
  const ModelConfig& c = ctx.cfg;
  const Batch& qb = queries;
  const int64_t D = c.head_dim, nh = c.num_attention_heads, Dr = c.qk_rope_head_dim;
  const LayerMode mode = c.layer_mode[ctx.layer];

  scratch_vector<float> ql, q;
  {
    ScopedOp op(Op::AttnQuery);
    ql = linear(xq, qb.rows, ctx.w.wq_a);
    rms_norm_rows(ql.data(), qb.rows, c.q_lora_rank, ctx.w.q_norm, c.rms_norm_eps);
    q = linear(ql.data(), qb.rows, ctx.w.wq_b);
    rope_rows(q.data(), qb.rows * nh, D, Dr, qb.pos.data(), nh, ctx.freqs);
  }
  ChunkWindow win;
  {
    ScopedOp op(Op::AttnWindow);
    win = window_rows(ctx, x);
  }
  if (mode == LayerMode::Full) {
    ScopedOp op(Op::Compressor);
    run_compressor(ctx, x);
  }
  const LayerContext qctx{c, ctx.w, ctx.layer, ctx.freqs, qb};
  if (mode == LayerMode::Full || mode == LayerMode::Reindex) {
    ScopedOp op(Op::Indexer);
    run_indexer(qctx, xq, ql.data(), sel);
  }
  trace_reuse(ctx, qb, sel);

  const int64_t max_keys = c.sliding_window + (mode == LayerMode::Swa ? 0 : c.index_topk);
  std::optional<ScopedOp> gather_op(std::in_place, Op::AttnGather);
  scratch_vector<std::optional<DecodedRows>> decoded;  // owns what keys point into
  const scratch_vector<const float*> keys = gather_keys(ctx, qb, sel, win, max_keys, decoded);
  gather_op.reset();
  std::optional<ScopedOp> core_op(std::in_place, Op::AttnCore);
  scratch_vector<float> o(qb.rows * nh * D);
  kernels::AttentionParams ap;
  ap.q = q.data();
  ap.keys = keys.data();
  ap.sink = ctx.w.sink.data();
  ap.out = o.data();
  ap.m = qb.rows;
  ap.heads = nh;
  ap.dim = D;
  ap.max_keys = max_keys;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  kernels::attention(ap);
  rope_rows(o.data(), qb.rows * nh, D, Dr, qb.pos.data(), nh, ctx.freqs, /*inverse=*/true);
  core_op.reset();
  {
    ScopedOp op(Op::AttnOutput);
    attention_output(c, ctx.w, qb.rows, o.data(), out);
  }
  ScopedOp op(Op::AttnStore);
  store_window(ctx, win);
}

}  // namespace troupe::model
