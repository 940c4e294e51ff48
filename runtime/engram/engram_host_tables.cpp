#include "runtime/engram/engram_host_tables.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime {

std::shared_ptr<EngramHostTables> EngramHostTables::adopt(model::ModelWeights& weights,
                                                          const model::ModelConfig& config,
                                                          bool try_huge) {
  std::vector<model::EngramWeights*> layers;
  for (model::LayerWeights& l : weights.layers)
    if (l.has_engram) layers.push_back(&l.engram);
  if (layers.empty()) return nullptr;
  TROUPE_CHECK(layers.size() == config.engram_layer_ids.size(), "engram tables: ", layers.size(),
               " Engram layers bound, the config lists ", config.engram_layer_ids.size());
  int64_t bytes = 0;
  for (const model::EngramWeights* e : layers) bytes += kernels::copied_bytes(e->embed);
  auto t = std::make_shared<EngramHostTables>();
  t->mapping_ = SharedHostMapping::create(static_cast<size_t>(bytes), "troupe-engram", try_huge);
  std::byte* at = t->mapping_.data();
  for (model::EngramWeights* e : layers) {
    e->embed = kernels::copy_weight(e->embed, at);  // the layer reads here from now on
    at += kernels::copied_bytes(e->embed);
    t->tables_.push_back(e->embed);
    t->table_bytes_ += kernels::data_bytes(e->embed) + kernels::scale_bytes(e->embed);
  }
  return t;
}

int64_t EngramHostTables::prefetch(const std::vector<std::vector<int64_t>>& rows) const {
  int64_t touched = 0;
  unsigned sum = 0;  // reads the compiler must keep
  for (size_t i = 0; i < rows.size() && i < tables_.size(); ++i) {
    const kernels::WeightView& w = tables_[i];
    const auto* codes = static_cast<const unsigned char*>(w.data);
    const int64_t row_bytes = w.cols, scale_row = w.cols / 32;
    for (int64_t r : rows[i]) {
      if (r < 0 || r >= w.rows) continue;
      for (int64_t b = 0; b < row_bytes; b += 64) sum += codes[r * row_bytes + b];
      sum += w.scale[r * scale_row];
      touched += 1;
    }
  }
  volatile unsigned sink = sum;
  (void)sink;
  return touched;
}

std::vector<std::vector<int64_t>> engram_rows_of_plan(const model::ModelConfig& c,
                                                      const model::ModelWeights& w,
                                                      const model::EngramHashTables& hashes,
                                                      const StepPlan& plan) {
  const int64_t layers = static_cast<int64_t>(c.engram_layer_ids.size());
  std::vector<std::vector<int64_t>> rows(layers);
  if (layers == 0) return rows;
  const int64_t N = c.engram_max_ngram_size, nG = c.engram_n_heads * (N - 1);
  const int64_t pad = w.engram_token_map[c.engram_pad_token_id];
  const int64_t V = static_cast<int64_t>(w.engram_token_map.size());
  std::vector<int64_t> ctok(N), ids(nG);
  for (const ScheduledChunk& ch : plan.chunks) {
    const int64_t back = static_cast<int64_t>(ch.lookback.size());
    for (int64_t i = 0; i < static_cast<int64_t>(ch.token_ids.size()); ++i) {
      const int64_t p = ch.start + i;
      bool known = true;
      for (int64_t k = 0; k < N && known; ++k) {
        const int64_t q = p - k;
        if (q < 0) {
          ctok[k] = pad;
          continue;
        }
        const int64_t tok = q >= ch.start ? ch.token_ids[q - ch.start]
                            : ch.start - q <= back ? ch.lookback[back - (ch.start - q)]
                                                   : -1;
        known = tok >= 0 && tok < V;  // a placeholder, or context the plan does not carry
        if (known) ctok[k] = w.engram_token_map[tok];
      }
      if (!known) continue;
      for (int64_t e = 0; e < layers; ++e) {
        const model::LayerWeights& L = w.layers[c.engram_layer_ids[e]];
        model::engram_hash_ids(hashes, e, ctok.data(), L.engram.multipliers.data(), ids.data());
        rows[e].insert(rows[e].end(), ids.begin(), ids.end());
      }
    }
  }
  for (auto& r : rows) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
  }
  return rows;
}

}  // namespace troupe::runtime
