#include "model/speculative.h"

#include <cstring>

#include "kernels/check.h"
#include "kernels/sampling.h"

namespace troupe::model {

StepSnapshot::StepSnapshot(const SequenceState& st, int64_t n_new) : length_(st.length()) {
  const int64_t layers = static_cast<int64_t>(st.layers.size());
  const int64_t row = st.layout.window.bytes();
  window_.resize(layers);
  for (int64_t l = 0; l < layers; ++l) {
    const LayerState& L = st.layers[l];
    ckv_bytes_.push_back(L.ckv.size());
    ikey_bytes_.push_back(L.ikey.size());
    carry_v_.push_back(L.carry_v);
    carry_s_.push_back(L.carry_s);
    const int64_t W = static_cast<int64_t>(L.window_pos.size());
    for (int64_t i = 0; i < std::min(n_new, W); ++i) {
      const int64_t slot = (length_ + i) % W;
      const uint8_t* b = &L.window[slot * row];
      window_[l].push_back({slot, L.window_pos[slot], {b, b + row}});
    }
  }
  if (!st.feature_ring) return;
  const FeatureRing& F = *st.feature_ring;
  const int64_t bytes = F.width * static_cast<int64_t>(sizeof(float));
  for (int64_t i = 0; i < std::min(n_new, F.slots()); ++i) {
    const int64_t slot = (length_ + i) % F.slots();
    const auto* b = reinterpret_cast<const uint8_t*>(&F.rows[slot * F.width]);
    features_.push_back({slot, F.pos[slot], {b, b + bytes}});
  }
}

void StepSnapshot::restore(SequenceState& st) const {
  const int64_t row = st.layout.window.bytes();
  st.length_ = length_;
  st.tokens.resize(length_);
  for (size_t l = 0; l < st.layers.size(); ++l) {
    LayerState& L = st.layers[l];
    L.ckv.resize(ckv_bytes_[l]);
    L.ikey.resize(ikey_bytes_[l]);
    L.carry_v = carry_v_[l];
    L.carry_s = carry_s_[l];
    for (const Slot& s : window_[l]) {
      std::memcpy(&L.window[s.slot * row], s.bytes.data(), row);
      L.window_pos[s.slot] = s.pos;
    }
  }
  if (!st.feature_ring) return;
  FeatureRing& F = *st.feature_ring;
  for (const Slot& s : features_) {
    std::memcpy(&F.rows[s.slot * F.width], s.bytes.data(), s.bytes.size());
    F.pos[s.slot] = s.pos;
  }
}

namespace {

// Runs tokens through the target; returns [tokens, V] logits when asked, else the last row.
std::vector<float> run_target(const Forward& forward, SequenceState& st,
                              std::span<const int32_t> tokens, bool all_logits) {
  SequenceInput in{&st, tokens, all_logits};
  return std::move(forward.run({&in, 1})[0]);
}

}  // namespace

SpeculativeResult speculative_greedy(const Forward& forward, const DsparkDraft& draft,
                                     SequenceState& state, std::span<const int32_t> prompt,
                                     int64_t n_tokens, const DraftOverride& override) {
  const ModelConfig& c = forward.config();
  const int64_t V = c.vocab_size;
  TROUPE_CHECK(n_tokens >= 0, "speculative_greedy: n_tokens ", n_tokens, " < 0");
  if (!state.feature_ring) state.enable_features(c);
  SpeculativeResult out;
  if (n_tokens == 0) return out;
  int32_t bonus = kernels::argmax(run_target(forward, state, prompt, false).data(), V);
  out.tokens.push_back(bonus);

  while (static_cast<int64_t>(out.tokens.size()) < n_tokens) {
    const int64_t a = state.length() - 1;
    const int64_t left = n_tokens - static_cast<int64_t>(out.tokens.size());
    const int64_t k = std::min(c.num_speculative_tokens, left - 1);
    std::vector<int32_t> verify{bonus};
    std::vector<int32_t> drafts =
        draft.propose(*state.feature_ring, a, state.tokens[a], bonus, k).tokens;
    if (override) override(drafts);
    TROUPE_CHECK(static_cast<int64_t>(drafts.size()) <= k, "draft override added tokens");
    verify.insert(verify.end(), drafts.begin(), drafts.end());

    const StepSnapshot snapshot(state, static_cast<int64_t>(verify.size()));
    const std::vector<float> P = run_target(forward, state, verify, true);
    size_t m = 0;
    while (m < drafts.size() && drafts[m] == kernels::argmax(&P[m * V], V)) ++m;
    bonus = kernels::argmax(&P[m * V], V);
    out.tokens.insert(out.tokens.end(), drafts.begin(), drafts.begin() + m);
    out.tokens.push_back(bonus);
    if (m < drafts.size()) {  // roll back to [.., b, d_1..d_m]
      snapshot.restore(state);
      run_target(forward, state, std::span(verify).first(m + 1), false);
    }
    out.stats.steps += 1;
    out.stats.drafted += static_cast<int64_t>(drafts.size());
    out.stats.accepted += static_cast<int64_t>(m);
    out.stats.emitted += static_cast<int64_t>(m) + 1;
  }
  return out;
}

}  // namespace troupe::model
