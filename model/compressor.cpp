// The Full-layer compressor (MODEL.md §5.3): group g covers tokens [g·r, g·r+r) and
// is emitted once its r-th token arrives; an open group is carried in the state.
//
//   r = 1: lat = RMSNorm(wkv·x)
//   r > 1: lat = RMSNorm(Σ_k v_k ⊙ softmax_k(s_k)),  v_k = wkv·x_k, s_k = wgate·x_k
//   cKV[g] = nvfp4(rope(lat, g·r));  iK[g] = mxfp4(rope(RMSNorm(wk·lat), g·r))
#include <cmath>

#include "model/csa.h"
#include "model/ops.h"

namespace troupe::model {
namespace {

// lat[D] <- channelwise softmax-weighted sum of the r carried tokens.
void pool_group(const std::vector<float>& v, const std::vector<float>& s, int64_t r, int64_t D,
                float* lat) {
  for (int64_t c = 0; c < D; ++c) {
    float mx = s[c];
    for (int64_t k = 1; k < r; ++k) mx = std::max(mx, s[k * D + c]);
    float num = 0, den = 0;
    for (int64_t k = 0; k < r; ++k) {
      const float e = std::exp(s[k * D + c] - mx);
      den += e;
      num += v[k * D + c] * e;
    }
    lat[c] = num / den;
  }
}

}  // namespace

void run_compressor(const LayerContext& ctx, const float* x) {
  const ModelConfig& c = ctx.cfg;
  const CompressorWeights& cw = ctx.w.compressor;
  const int64_t D = c.head_dim, dI = c.index_head_dim, r = c.ratio(ctx.layer);
  const Batch& b = ctx.batch;
  scratch_vector<float> v = linear(x, b.rows, cw.wkv);
  scratch_vector<float> s;
  if (r > 1) s = linear(x, b.rows, cw.wgate);

  // Collect every group completed in this call: its latent and its (sequence, group).
  scratch_vector<float> lat;
  scratch_vector<int64_t> group_pos, group_seq;
  for (int64_t row = 0; row < b.rows; ++row) {
    const int64_t p = b.pos[row];
    KvStore& st = *b.states[b.seq[row]];
    if (p < st.length()) continue;  // replayed token: its global rows are already stored
    std::vector<float>& carry_v = st.carry_v(ctx.layer);
    std::vector<float>& carry_s = st.carry_s(ctx.layer);
    if (r == 1) {
      lat.insert(lat.end(), &v[row * D], &v[row * D] + D);
    } else {
      carry_v.insert(carry_v.end(), &v[row * D], &v[row * D] + D);
      carry_s.insert(carry_s.end(), &s[row * D], &s[row * D] + D);
      if (p % r != r - 1) continue;
      lat.resize(lat.size() + D);
      pool_group(carry_v, carry_s, r, D, &lat[lat.size() - D]);
      st.close_group(ctx.layer, p - (r - 1));
    }
    group_pos.push_back(p - (r - 1));  // g·r
    group_seq.push_back(b.seq[row]);
  }
  const int64_t n = static_cast<int64_t>(group_pos.size());
  if (n == 0) return;
  rms_norm_rows(lat.data(), n, D, cw.norm, c.rms_norm_eps);

  // Index keys use the unrotated latent.
  scratch_vector<float> ik = linear(lat.data(), n, ctx.w.indexer.wk);
  rms_norm_rows(ik.data(), n, dI, ctx.w.indexer.k_norm, c.rms_norm_eps);
  rope_rows(ik.data(), n, dI, c.qk_rope_head_dim, group_pos.data(), 1, ctx.freqs);
  rope_rows(lat.data(), n, D, c.qk_rope_head_dim, group_pos.data(), 1, ctx.freqs);
  const KvRowLayout layout = KvRowLayout::of(c);
  scratch_vector<uint8_t> ckv(layout.ckv.bytes()), ikey(layout.ikey.bytes());
  for (int64_t g = 0; g < n; ++g) {
    layout.ckv.encode(&lat[g * D], ckv.data());
    layout.ikey.encode(&ik[g * dI], ikey.data());
    b.states[group_seq[g]]->append_row(ctx.layer, ckv.data(), ikey.data());
  }
}

}  // namespace troupe::model
