#include "config/serve_config.h"

#include "kernels/check.h"
#include "kernels/parallel.h"
#include "runtime/eplb/eplb_config_json.h"
#include "runtime/faults/fault_plan.h"

namespace troupe::config {
namespace {

// "max-model-len (cfg.yaml line 3)" or just "max-model-len" when it kept its default.
std::string where(const std::map<std::string, std::string>& origins, const std::string& key) {
  const auto it = origins.find(key);
  return it == origins.end() ? key : key + " (" + it->second + ")";
}

}  // namespace

void ServeConfig::validate(const std::map<std::string, std::string>& origins) const {
  // Without chunking a prompt runs in one step, so a step's token budget must hold the
  // longest request the server accepts, or that request would wait forever.
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len)
    TROUPE_FAIL(where(origins, "max-num-batched-tokens")
                << " = " << max_num_batched_tokens
                << " must be >= " << where(origins, "max-model-len") << " = " << max_model_len
                << " when enable-chunked-prefill is false: a longer prompt could never be "
                   "scheduled");
  if (num_redundant_experts > 0 && !enable_expert_parallel)
    TROUPE_FAIL(where(origins, "num-redundant-experts")
                << " = " << num_redundant_experts << " needs "
                << where(origins, "enable-expert-parallel")
                << " = true: without expert parallelism every rank holds every expert");
  runtime::eplb::EplbConfigJson eplb_json;
  try {
    eplb_json = runtime::eplb::parse_eplb_config(eplb_config);
  } catch (const Error& e) {
    TROUPE_FAIL(where(origins, "eplb-config") << ": " << e.what());
  }
  if (enable_eplb && !enable_expert_parallel)
    TROUPE_FAIL(where(origins, "enable-eplb") << " needs " << where(origins, "enable-expert-parallel")
                << " = true: the placement it balances spreads the experts over the ranks");
  if (!eplb_config.empty() && !enable_eplb)
    TROUPE_FAIL(where(origins, "eplb-config") << " is set but " << where(origins, "enable-eplb")
                << " is false");
  if (eplb_json.num_redundant_experts && num_redundant_experts > 0 &&
      *eplb_json.num_redundant_experts != num_redundant_experts)
    TROUPE_FAIL(where(origins, "eplb-config") << ": num_redundant_experts = "
                << *eplb_json.num_redundant_experts << " disagrees with "
                << where(origins, "num-redundant-experts") << " = " << num_redundant_experts);
  if (!expert_counts_file.empty() && !enable_expert_parallel)
    TROUPE_FAIL(where(origins, "expert-counts-file") << " needs "
                << where(origins, "enable-expert-parallel")
                << " = true: the counts come from the expert-parallel ranks");
  if (eplb_json.num_redundant_experts.value_or(0) > 0 && !enable_expert_parallel)
    TROUPE_FAIL(where(origins, "eplb-config") << ": num_redundant_experts needs "
                << where(origins, "enable-expert-parallel") << " = true");
  try {
    runtime::FaultPlan::parse(inject_faults);
  } catch (const Error& e) {
    TROUPE_FAIL(where(origins, "inject-faults") << ": " << e.what());
  }
  try {
    runtime::parse_speculative_config(speculative_config);
  } catch (const Error& e) {
    TROUPE_FAIL(where(origins, "speculative-config") << ": " << e.what());
  }
  // The disk tier is fed by the host tier (docs/kv-cache.md "Host and disk tiers").
  if (kv_disk_dir.empty() != (kv_disk_bytes == 0))
    TROUPE_FAIL(where(origins, "kv-disk-dir") << " and " << where(origins, "kv-disk-bytes")
                << " go together: a disk tier needs a folder and a size");
  if (kv_disk_bytes > 0 && kv_offload_bytes == 0)
    TROUPE_FAIL(where(origins, "kv-disk-bytes")
                << " needs a host tier: set kv-offload-bytes (blocks reach disk from host memory)");
  to_engine_config().scheduler.validate();  // the runtime's own rules, as a backstop
}

runtime::eplb::EplbConfig ServeConfig::eplb() const {
  runtime::eplb::EplbConfig c = runtime::eplb::parse_eplb_config(eplb_config).config;
  c.enabled = enable_eplb;
  return c;
}

int64_t ServeConfig::redundant_experts() const {
  return runtime::eplb::parse_eplb_config(eplb_config)
      .num_redundant_experts.value_or(num_redundant_experts);
}

runtime::EngineConfig ServeConfig::to_engine_config() const {
  runtime::EngineConfig e;
  e.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  e.scheduler.max_num_running = max_num_seqs;
  e.scheduler.max_prefill_context_read = max_prefill_context_read;
  e.scheduler.max_admissions_per_step = max_admissions_per_step;
  e.scheduler.max_kv_loads_per_step = max_kv_loads_per_step;
  e.scheduler.max_model_len = max_model_len;
  e.scheduler.enable_chunked_prefill = enable_chunked_prefill;
  e.scheduler.policy = scheduling_policy;
  e.scheduler.check_kv_invariants = kv_check_invariants;
  e.async_scheduling = async_scheduling;
  e.kv_budget_bytes = kv_cache_memory_bytes;
  e.block_size = block_size;
  e.enable_prefix_cache = enable_prefix_caching;
  e.enable_prefix_snapshots = enable_prefix_snapshots;
  e.executor.bounded_replay = bounded_replay;
  e.executor.clip_prefix = clip_prefix;
  e.executor.prefix_replay = prefix_replay;
  e.speculative = runtime::parse_speculative_config(speculative_config);
  e.kv_pinned_bytes = kv_pinned_bytes;
  e.kv_offload_bytes = kv_offload_bytes;
  e.kv_disk_dir = kv_disk_dir;
  e.kv_disk_bytes = kv_disk_bytes;
  e.kv_disk_tag = model;  // the checkpoint: another one's files are foreign
  return e;
}

void apply_process_settings(const ServeConfig& cfg) {
  kernels::set_num_threads(static_cast<int>(cfg.threads));  // 0: all hardware threads
}

}  // namespace troupe::config
