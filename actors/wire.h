// The messages that may cross a process (CAF's middleman, DESIGN.md "Scale-out"): their
// CAF 0.17 inspect() functions and the project's type-ID block. Everything else in
// actors/messages.h stays local (CAF_ALLOW_UNSAFE_MESSAGE_TYPE there): StepPlan and
// StepResult go between a scheduler and its rank, which share a process; StagedPlacement
// holds a pointer to weights in this process's memory.
//
// Every process of a cluster registers the same block in the same order
// (add_wire_types), or the middleman cannot decode what it receives. Fields are listed
// in declaration order; tests/actors/wire_test.cpp round-trips each type with every field
// set, so a field added to a struct and not here fails there.
//
// Token buffers (prompts, outputs) are std::vector<int32_t>: CAF writes an arithmetic
// vector as its length and one raw block, so a long prompt travels once, as one buffer.
#pragma once

#include <caf/all.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <memory>
#include <string>
#include <variant>

// Included at the end of actors/messages.h, so every sender sees these functions.
#include "actors/messages.h"

namespace troupe::kernels {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  return f(caf::meta::type_name("SamplingParams"), x.temperature, x.top_k, x.top_p, x.min_p,
           x.seed);
}

}  // namespace troupe::kernels

namespace troupe::runtime {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestParams& x) {
  return f(caf::meta::type_name("RequestParams"), x.sampling, x.max_tokens, x.stop_token_ids,
           x.stop, x.ignore_eos, x.include_stop_str_in_output, x.skip_special_tokens, x.priority,
           x.num_logprobs, x.kv_save, x.kv_restore, x.kv_delete, x.kv_hand_off_after);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Sibling& x) {
  return f(caf::meta::type_name("Sibling"), x.id, x.params);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Logprob& x) {
  return f(caf::meta::type_name("Logprob"), x.token, x.logprob);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampleLogprobs& x) {
  return f(caf::meta::type_name("SampleLogprobs"), x.sampled, x.top);
}

// StopReason is a std::variant, which CAF 0.17 does not know: it travels as its index
// and both alternatives, and is rebuilt after loading.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestOutput& x) {
  uint8_t stop_kind = static_cast<uint8_t>(x.stop_reason.index());
  int32_t stop_token = stop_kind == 1 ? std::get<1>(x.stop_reason) : 0;
  std::string stop_text = stop_kind == 2 ? std::get<2>(x.stop_reason) : std::string();
  auto rebuild = caf::meta::load_callback([&]() -> caf::error {
    switch (stop_kind) {
      case 0:
        x.stop_reason = std::monostate{};
        return caf::none;
      case 1:
        x.stop_reason = stop_token;
        return caf::none;
      case 2:
        x.stop_reason = std::move(stop_text);
        return caf::none;
      default:
        return caf::make_error(caf::sec::invalid_argument, "RequestOutput: bad stop kind");
    }
  });
  return f(caf::meta::type_name("RequestOutput"), x.id, x.new_tokens, x.new_logprobs, x.new_text,
           x.status, stop_kind, stop_token, stop_text, x.error, x.error_cause,
           x.num_cached_tokens, x.num_restored_tokens, rebuild);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RankLoad& x) {
  return f(caf::meta::type_name("RankLoad"), x.requests, x.cached_tokens, x.pinned);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepSample& x) {
  return f(caf::meta::type_name("StepSample"), x.step, x.admitted, x.plan_seconds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineFigures& x) {
  return f(caf::meta::type_name("EngineFigures"), x.running, x.waiting, x.used_blocks,
           x.free_blocks, x.kv_usage, x.tier_bytes, x.kv_pins, x.kv_pinned_bytes, x.steps, x.preemptions, x.admitted,
           x.scheduled_tokens, x.prefix_query_tokens, x.prefix_hit_tokens,
           x.prefix_snapshot_hits, x.prefix_replay_hits, x.prefix_replay_tokens,
           x.prefix_tier_hit_tokens, x.kv_restore_hits, x.failed_steps, x.restarts, x.spec_num_drafts,
           x.spec_num_draft_tokens, x.spec_num_accepted_tokens, x.spec_accepted_per_pos,
           x.eplb_rebalances, x.eplb_balance_before, x.eplb_balance_after,
           x.eplb_draft_rebalances, x.eplb_draft_balance_before, x.eplb_draft_balance_after,
           x.spec_steps_by_k,
           x.kv_transfer_bytes, x.kv_transfer_seconds_buckets, x.kv_transfer_seconds_sum,
           x.kv_transfer_failures, x.kv_transfer_fallbacks, x.kv_transfer_rma,
           x.kv_transfer_messages, x.kv_transfer_descriptors, x.kv_transfer_leases_expired,
           x.kv_handoff_phase_seconds, x.kv_handoff_phased, x.instance,
           x.schedule_cpu_s, x.update_cpu_s, x.rank_busy_seconds, x.recent_steps, x.per_rank);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftStepSummary& x) {
  return f(caf::meta::type_name("DraftStepSummary"), x.limit, x.decodes, x.timed, x.seconds,
           x.verified, x.running);
}

}  // namespace troupe::runtime

namespace troupe::runtime::collectives {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepMetadata& x) {
  return f(caf::meta::type_name("StepMetadata"), x.step_min, x.step_max, x.tokens, x.any_work,
           x.placement_ready, x.any_failed, x.any_draft, x.draft_placement_ready, x.draft_step);
}

template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, CollectiveMessage<T>& x) {
  return f(caf::meta::type_name("CollectiveMessage"), x.from, x.to, x.step, x.round, x.payload);
}

}  // namespace troupe::runtime::collectives

namespace troupe::runtime::eplb {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ExpertPlacement& x) {
  return f(caf::meta::type_name("ExpertPlacement"), x.num_layers, x.num_logical, x.num_physical,
           x.max_replicas, x.phy2log, x.log2phy, x.logcnt);
}

}  // namespace troupe::runtime::eplb

namespace troupe::actors {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerateRequest& x) {
  return f(caf::meta::type_name("GenerateRequest"), x.id, x.prompt, x.params, x.siblings);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.output, x.resume);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ExpertCounts& x) {
  return f(caf::meta::type_name("ExpertCounts"), x.rank, x.step, x.epoch, x.counts, x.draft);
}

// The placement is shared (const) in a process; across one it is a copy, loaded into a
// fresh shared object.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PlacementUpdate& x) {
  bool has_placement = x.placement != nullptr;
  runtime::eplb::ExpertPlacement placement;
  if (Inspector::reads_state && has_placement) placement = *x.placement;  // saving
  auto adopt = caf::meta::load_callback([&]() -> caf::error {
    x.placement = has_placement ? std::make_shared<const runtime::eplb::ExpertPlacement>(
                                      std::move(placement))
                                : nullptr;
    return caf::none;
  });
  return f(caf::meta::type_name("PlacementUpdate"), x.epoch, has_placement, placement,
           x.planned_at, x.balance_before, x.balance_after, x.draft, adopt);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngramOwnerFigures& x) {
  return f(caf::meta::type_name("EngramOwnerFigures"), x.plans, x.rows, x.skipped_positions,
           x.table_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GroupJoin& x) {
  return f(caf::meta::type_name("GroupJoin"), x.instance, x.rank, x.size, x.address,
           x.scheduler);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GroupFormed& x) {
  return f(caf::meta::type_name("GroupFormed"), x.generation, x.addresses, x.schedulers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvHandoffBytes& x) {
  return f(caf::meta::type_name("KvHandoffBytes"), x.bytes, x.lease_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvLease& x) {
  return f(caf::meta::type_name("KvLease"), x.lease, x.address, x.remote_address, x.rkey, x.why);
}

// Registers the block below with an actor system's config (every process of a cluster).
void add_wire_types(caf::actor_system_config& cfg);

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::GenerateRequest))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::TokenEvent))
  CAF_ADD_TYPE_ID(troupe, (troupe::runtime::EngineFigures))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::DpSyncMessage))
  CAF_ADD_TYPE_ID(troupe, (troupe::runtime::RankLoad))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::ExpertCounts))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::PlacementUpdate))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::EngramOwnerFigures))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::GroupJoin))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::GroupFormed))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::DpPeers))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::KvHandoffBytes))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::KvLease))
CAF_END_TYPE_ID_BLOCK(troupe)
