// The Engram tables of a node (MODEL.md §7) in one shared host mapping, one copy for
// every rank of every instance on the node (DESIGN.md: the Engram owner). adopt() copies
// each Engram layer's embed table (ROWFP8 codes + scales) into the mapping and points
// the model's weight views at the copies, so every forward pass reads its rows there, in
// place. Row ids depend only on token ids, so the rows a planned step will read are known
// before it runs (engram_rows_of_plan), and prefetch() brings them in while the ranks run
// the step before.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/engram_hash.h"
#include "model/weights.h"
#include "runtime/engram/shared_host_mapping.h"
#include "runtime/scheduler/step_plan.h"

namespace troupe::runtime {

class EngramHostTables {
 public:
  // Copies the tables of `weights` into a new mapping and rebinds weights' Engram embed
  // views to it; call before any forward pass runs on `weights`, and keep the tables
  // alive as long as `weights` is used. nullptr when the model has no Engram layers.
  static std::shared_ptr<EngramHostTables> adopt(model::ModelWeights& weights,
                                                 const model::ModelConfig& config,
                                                 bool try_huge = true);

  const SharedHostMapping& mapping() const { return mapping_; }
  int64_t table_bytes() const { return table_bytes_; }  // codes + scales of every table
  int64_t layers() const { return static_cast<int64_t>(tables_.size()); }
  const kernels::WeightView& table(int64_t engram_index) const { return tables_[engram_index]; }

  // Touches every byte line of the rows (rows[i]: sorted ids of Engram layer i), so they
  // sit in the cache and the page tables before the step reads them. Returns the rows
  // touched.
  int64_t prefetch(const std::vector<std::vector<int64_t>>& rows) const;

 private:
  SharedHostMapping mapping_;
  std::vector<kernels::WeightView> tables_;  // [Engram layers] views into mapping_
  int64_t table_bytes_ = 0;
};

// The table rows a plan's forward pass reads, per Engram layer (in engram_layer_ids
// order), sorted and unique: for every position of every chunk, the hashed n-grams of
// its token and the N-1 before it (the chunk's lookback, then its own tokens). A
// position whose n-grams include a placeholder token (asynchronous scheduling: sampled by
// the step before) is skipped. Pure integer work; the same hashing as the layer.
std::vector<std::vector<int64_t>> engram_rows_of_plan(const model::ModelConfig& config,
                                                      const model::ModelWeights& weights,
                                                      const model::EngramHashTables& hashes,
                                                      const StepPlan& plan);

}  // namespace troupe::runtime
