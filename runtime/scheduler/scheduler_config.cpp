#include "runtime/scheduler/scheduler_config.h"

#include "kernels/check.h"

namespace troupe::runtime {

void SchedulerConfig::validate() const {
  TROUPE_CHECK(max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got ",
               max_num_batched_tokens);
  TROUPE_CHECK(max_num_running >= 1, "max_num_running must be >= 1, got ", max_num_running);
  TROUPE_CHECK(max_prefill_context_read >= 1, "max_prefill_context_read must be >= 1, got ",
               max_prefill_context_read);
  TROUPE_CHECK(max_admissions_per_step >= 1, "max_admissions_per_step must be >= 1, got ",
               max_admissions_per_step);
  TROUPE_CHECK(max_kv_loads_per_step >= 1, "max_kv_loads_per_step must be >= 1, got ",
               max_kv_loads_per_step);
  TROUPE_CHECK(max_model_len >= 2,
               "max_model_len must be >= 2 (a prompt token and an output "
               "token), got ",
               max_model_len);
  TROUPE_CHECK(num_speculative_tokens >= 0, "num_speculative_tokens must be >= 0, got ",
               num_speculative_tokens);
  TROUPE_CHECK(num_speculative_tokens == 0 || chunk_lookback_tokens >= 1,
               "speculative decoding needs chunk_lookback_tokens >= 1 (the anchor token)");
  TROUPE_CHECK(!adaptive_speculation || num_speculative_tokens > 0,
               "adaptive speculation needs num_speculative_tokens > 0");
  TROUPE_CHECK(snapshot_block_size >= 0, "snapshot_block_size must be >= 0, got ",
               snapshot_block_size);
}

}  // namespace troupe::runtime
