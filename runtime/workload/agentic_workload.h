// A multi-turn agentic workload: N conversations of T turns each. Every turn's prompt is
// the previous turn's prompt + that turn's output + U new user tokens, and every
// conversation starts with the same S-token system prompt, so most input tokens of a
// turn were already seen (prefix-cache hits for an engine that keeps them):
//
//   turn 0   [ system S ][ user0 U ]
//   turn 1   [ system S ][ user0 U ][ out0 O ][ user1 U ]
//   turn 2   [ system S ][ user0 U ][ out0 O ][ user1 U ][ out1 O ][ user2 U ]
//            |<------------- history: prompt + output of turn k-1 --->|
//
// The outputs are whatever the caller reports (the engine's real tokens); the system
// and user tokens are drawn from one seeded generator, so a workload is reproducible.
// Pure logic: no engine, no clock.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe::runtime {

struct AgenticWorkloadConfig {
  int64_t conversations = 4;  // N
  int64_t turns = 3;          // T per conversation, >= 1
  int64_t system_len = 64;    // S tokens shared by every conversation, >= 0
  int64_t user_len = 16;      // U new user tokens per turn, >= 1
  int64_t output_len = 16;    // O output tokens asked for per turn (max_tokens), >= 1
  int32_t min_token_id = 0;   // user and system tokens are drawn from [min, max)
  int32_t max_token_id = 4096;
  uint64_t seed = 1;

  void validate() const;  // throws troupe::Error naming the bad field

  // Prompt length of turn k when every earlier turn produced exactly output_len tokens.
  int64_t planned_prompt_len(int64_t turn) const;
};

// Token counts of the whole workload when every turn outputs exactly output_len tokens.
struct WorkloadTotals {
  int64_t turns = 0;          // N·T requests
  int64_t prompt_tokens = 0;  // Σ prompt lengths
  int64_t output_tokens = 0;  // N·T·O
  // Prompt tokens that an earlier request had as input or output: a turn's whole history
  // for k > 0, and the system prompt of every conversation but the first. An upper bound
  // on what a prefix cache can serve (it also loses partial blocks and each turn's last
  // output token, whose KV is never computed).
  int64_t seen_tokens = 0;
  double seen_fraction() const { return prompt_tokens ? double(seen_tokens) / prompt_tokens : 0; }
};

WorkloadTotals planned_totals(const AgenticWorkloadConfig& config);

class AgenticWorkload {
 public:
  explicit AgenticWorkload(AgenticWorkloadConfig config);  // validates config

  const AgenticWorkloadConfig& config() const { return config_; }
  int64_t num_conversations() const { return config_.conversations; }
  std::span<const int32_t> system_prompt() const { return system_; }
  std::span<const int32_t> user_tokens(int64_t conversation, int64_t turn) const;  // [U]

  int64_t turns_done(int64_t conversation) const;
  bool done(int64_t conversation) const { return turns_done(conversation) == config_.turns; }
  bool all_done() const;

  // The prompt of the conversation's next turn: its history + that turn's user tokens.
  // Throws if the conversation is done.
  std::vector<int32_t> next_prompt(int64_t conversation) const;

  // Ends the next turn with its output (any length, e.g. cut short by EOS): the history
  // becomes that turn's prompt + output.
  void finish_turn(int64_t conversation, std::span<const int32_t> output);

 private:
  struct Conversation {
    std::vector<int32_t> history;  // prompt + output of the last finished turn
    int64_t turns_done = 0;
  };
  const Conversation& conversation(int64_t c) const;

  AgenticWorkloadConfig config_;
  std::vector<int32_t> system_;  // [S]
  std::vector<int32_t> user_;    // [N, T, U]
  std::vector<Conversation> conversations_;
};

}  // namespace troupe::runtime
