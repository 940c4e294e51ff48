#include "runtime/workload/agentic_workload.h"

#include "kernels/check.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::runtime {

void AgenticWorkloadConfig::validate() const {
  TROUPE_CHECK(conversations >= 1, "conversations must be at least 1, got ", conversations);
  TROUPE_CHECK(turns >= 1, "turns must be at least 1, got ", turns);
  TROUPE_CHECK(system_len >= 0, "system_len must be at least 0, got ", system_len);
  TROUPE_CHECK(user_len >= 1, "user_len must be at least 1, got ", user_len);
  TROUPE_CHECK(output_len >= 1, "output_len must be at least 1, got ", output_len);
  TROUPE_CHECK(
      min_token_id >= 0 && min_token_id < max_token_id,
      "token ids [min_token_id, max_token_id) must be a non-empty range of ids >= 0, got [",
      min_token_id, ", ", max_token_id, ")");
}

int64_t AgenticWorkloadConfig::planned_prompt_len(int64_t turn) const {
  return system_len + (turn + 1) * user_len + turn * output_len;
}

WorkloadTotals planned_totals(const AgenticWorkloadConfig& c) {
  c.validate();
  WorkloadTotals t;
  t.turns = c.conversations * c.turns;
  t.output_tokens = t.turns * c.output_len;
  for (int64_t k = 0; k < c.turns; ++k) {
    t.prompt_tokens += c.conversations * c.planned_prompt_len(k);
    // Turn k > 0 has seen its history (turn k-1's prompt + output); a first turn has seen
    // the system prompt unless it is the very first request.
    const int64_t history = k == 0 ? c.system_len : c.planned_prompt_len(k - 1) + c.output_len;
    t.seen_tokens += k == 0 ? (c.conversations - 1) * history : c.conversations * history;
  }
  return t;
}

AgenticWorkload::AgenticWorkload(AgenticWorkloadConfig config) : config_(config) {
  config_.validate();
  uint64_t state = config_.seed;
  system_ = draw_tokens(state, config_.system_len, config_.min_token_id, config_.max_token_id);
  user_ = draw_tokens(state, config_.conversations * config_.turns * config_.user_len,
                      config_.min_token_id, config_.max_token_id);
  conversations_.resize(static_cast<size_t>(config_.conversations));
  for (Conversation& c : conversations_) c.history = system_;
}

std::span<const int32_t> AgenticWorkload::user_tokens(int64_t conversation, int64_t turn) const {
  TROUPE_CHECK(conversation >= 0 && conversation < config_.conversations,
               "conversation must be in [0, ", config_.conversations, "), got ", conversation);
  TROUPE_CHECK(turn >= 0 && turn < config_.turns, "turn must be in [0, ", config_.turns, "), got ",
               turn);
  const int64_t at = (conversation * config_.turns + turn) * config_.user_len;
  return std::span<const int32_t>(user_).subspan(size_t(at), size_t(config_.user_len));
}

const AgenticWorkload::Conversation& AgenticWorkload::conversation(int64_t c) const {
  TROUPE_CHECK(c >= 0 && c < config_.conversations, "conversation must be in [0, ",
               config_.conversations, "), got ", c);
  return conversations_[size_t(c)];
}

int64_t AgenticWorkload::turns_done(int64_t c) const {
  return conversation(c).turns_done;
}

bool AgenticWorkload::all_done() const {
  for (const Conversation& c : conversations_)
    if (c.turns_done < config_.turns) return false;
  return true;
}

std::vector<int32_t> AgenticWorkload::next_prompt(int64_t c) const {
  const Conversation& conv = conversation(c);
  TROUPE_CHECK(conv.turns_done < config_.turns, "conversation ", c, " has no turn left");
  const auto user = user_tokens(c, conv.turns_done);
  std::vector<int32_t> prompt = conv.history;
  prompt.insert(prompt.end(), user.begin(), user.end());
  return prompt;
}

void AgenticWorkload::finish_turn(int64_t c, std::span<const int32_t> output) {
  std::vector<int32_t> prompt = next_prompt(c);  // checks c and that a turn is left
  prompt.insert(prompt.end(), output.begin(), output.end());
  Conversation& conv = conversations_[size_t(c)];
  conv.history = std::move(prompt);
  ++conv.turns_done;
}

}  // namespace troupe::runtime
