// The multi-turn agentic workload generator: seeded token draws (checked against
// splitmix64 values computed independently), the prefix relation between turns, token
// counts by hand and by brute force, and config validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/check.h"
#include "runtime/workload/agentic_workload.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::runtime {
namespace {

AgenticWorkloadConfig small_config() {
  AgenticWorkloadConfig c;
  c.conversations = 3;
  c.turns = 4;
  c.system_len = 10;
  c.user_len = 4;
  c.output_len = 5;
  c.min_token_id = 5;
  c.max_token_id = 4096;
  c.seed = 42;
  return c;
}

std::vector<int32_t> fake_output(int64_t conversation, int64_t turn, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = int32_t(1000 * conversation + 10 * turn + i);
  return out;
}

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

TEST(RandomTokens, Splitmix64ReferenceValues) {
  uint64_t state = 0;  // the published splitmix64 sequence from state 0
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(state), 0x06c45d188009454full);
  state = 0;
  EXPECT_EQ(draw_tokens(state, 2, 10, 11), (std::vector<int32_t>{10, 10}));
  EXPECT_EQ(state, 2 * 0x9e3779b97f4a7c15ull);
}

TEST(AgenticWorkload, TokensAreSplitmix64Draws) {
  // splitmix64 from state 7, x % 900 + 100, computed with Python big integers.
  AgenticWorkloadConfig c;
  c.conversations = 1;
  c.turns = 1;
  c.system_len = 3;
  c.user_len = 2;
  c.min_token_id = 100;
  c.max_token_id = 1000;
  c.seed = 7;
  const AgenticWorkload w(c);
  const std::vector<int32_t> system(w.system_prompt().begin(), w.system_prompt().end());
  EXPECT_EQ(system, (std::vector<int32_t>{787, 304, 946}));
  const auto user = w.user_tokens(0, 0);
  EXPECT_EQ(std::vector<int32_t>(user.begin(), user.end()), (std::vector<int32_t>{403, 674}));
  EXPECT_EQ(w.next_prompt(0), (std::vector<int32_t>{787, 304, 946, 403, 674}));
}

TEST(AgenticWorkload, SameSeedSameWorkloadOtherSeedOther) {
  const AgenticWorkloadConfig c = small_config();
  AgenticWorkloadConfig other = c;
  other.seed = 43;
  const AgenticWorkload a(c), b(c), d(other);
  for (int64_t conv = 0; conv < c.conversations; ++conv) {
    EXPECT_EQ(a.next_prompt(conv), b.next_prompt(conv));
    EXPECT_NE(a.next_prompt(conv), d.next_prompt(conv));
  }
  for (const AgenticWorkload* w : {&a, &d})
    for (int64_t conv = 0; conv < c.conversations; ++conv)
      for (int64_t t = 0; t < c.turns; ++t)
        for (int32_t id : w->user_tokens(conv, t)) {
          EXPECT_GE(id, c.min_token_id);
          EXPECT_LT(id, c.max_token_id);
        }
}

TEST(AgenticWorkload, EachTurnExtendsThePreviousTurnAndItsOutput) {
  const AgenticWorkloadConfig c = small_config();
  AgenticWorkload w(c);
  const std::vector<int32_t> system(w.system_prompt().begin(), w.system_prompt().end());
  ASSERT_EQ(system.size(), 10u);
  std::vector<std::vector<int32_t>> first_turns;
  for (int64_t conv = 0; conv < c.conversations; ++conv) {
    std::vector<int32_t> history = system;
    for (int64_t t = 0; t < c.turns; ++t) {
      EXPECT_FALSE(w.done(conv));
      EXPECT_EQ(w.turns_done(conv), t);
      const std::vector<int32_t> prompt = w.next_prompt(conv);
      EXPECT_EQ(int64_t(prompt.size()), c.planned_prompt_len(t));
      EXPECT_TRUE(starts_with(prompt, history)) << "conversation " << conv << " turn " << t;
      const auto user = w.user_tokens(conv, t);
      EXPECT_TRUE(std::equal(user.begin(), user.end(), prompt.end() - c.user_len));
      if (t == 0) first_turns.push_back(prompt);
      const std::vector<int32_t> out = fake_output(conv, t, c.output_len);
      w.finish_turn(conv, out);
      history = prompt;
      history.insert(history.end(), out.begin(), out.end());
    }
    EXPECT_TRUE(w.done(conv));
    EXPECT_THROW(w.next_prompt(conv), Error);
  }
  EXPECT_TRUE(w.all_done());
  // Conversations share the system prompt and nothing after it.
  EXPECT_NE(first_turns[0][10], first_turns[1][10]);
}

TEST(AgenticWorkload, ShortOutputsGiveShorterPrompts) {
  AgenticWorkload w(small_config());
  w.finish_turn(1, fake_output(1, 0, 2));  // e.g. EOS after two tokens
  const std::vector<int32_t> p = w.next_prompt(1);
  EXPECT_EQ(p.size(), 10u + 4 + 2 + 4);
  EXPECT_EQ(p[14], 1000);
  EXPECT_EQ(p[15], 1001);
  EXPECT_FALSE(w.all_done());
  EXPECT_EQ(w.turns_done(0), 0);
}

TEST(AgenticWorkload, PlannedTotalsByHand) {
  AgenticWorkloadConfig c = small_config();
  c.conversations = 2;
  c.turns = 3;
  // Prompts 14, 23, 32 per conversation; seen: 10 (second conversation's system prompt),
  // then each turn's history 14 + 5 = 19 and 23 + 5 = 28, twice.
  const WorkloadTotals t = planned_totals(c);
  EXPECT_EQ(t.turns, 6);
  EXPECT_EQ(t.prompt_tokens, 2 * (14 + 23 + 32));
  EXPECT_EQ(t.output_tokens, 30);
  EXPECT_EQ(t.seen_tokens, 10 + 2 * 19 + 2 * 28);
  EXPECT_DOUBLE_EQ(t.seen_fraction(), 104.0 / 138.0);
}

// Brute force: for each request in submission order, the longest prefix it shares with
// the prompt + output of any earlier request.
TEST(AgenticWorkload, SeenTokensMatchBruteForce) {
  for (const int64_t system_len : {0, 1, 10}) {
    AgenticWorkloadConfig c = small_config();
    c.system_len = system_len;
    AgenticWorkload w(c);
    std::vector<std::vector<int32_t>> earlier;
    int64_t seen = 0, prompts = 0;
    for (int64_t t = 0; t < c.turns; ++t)
      for (int64_t conv = 0; conv < c.conversations; ++conv) {
        const std::vector<int32_t> prompt = w.next_prompt(conv);
        size_t best = 0;
        for (const auto& e : earlier) {
          const auto n = std::min(e.size(), prompt.size());
          best = std::max<size_t>(
              best,
              std::mismatch(prompt.begin(), prompt.begin() + n, e.begin()).first - prompt.begin());
        }
        seen += int64_t(best);
        prompts += int64_t(prompt.size());
        const std::vector<int32_t> out = fake_output(conv, t, c.output_len);
        w.finish_turn(conv, out);
        earlier.push_back(prompt);
        earlier.back().insert(earlier.back().end(), out.begin(), out.end());
      }
    const WorkloadTotals totals = planned_totals(c);
    EXPECT_EQ(totals.seen_tokens, seen) << "system_len " << system_len;
    EXPECT_EQ(totals.prompt_tokens, prompts);
  }
}

TEST(AgenticWorkload, BadConfigNamesTheField) {
  const struct {
    void (*edit)(AgenticWorkloadConfig&);
    const char* needle;
  } cases[] = {
      {[](AgenticWorkloadConfig& c) { c.conversations = 0; }, "conversations"},
      {[](AgenticWorkloadConfig& c) { c.turns = 0; }, "turns"},
      {[](AgenticWorkloadConfig& c) { c.system_len = -1; }, "system_len"},
      {[](AgenticWorkloadConfig& c) { c.user_len = 0; }, "user_len"},
      {[](AgenticWorkloadConfig& c) { c.output_len = 0; }, "output_len"},
      {[](AgenticWorkloadConfig& c) { c.max_token_id = c.min_token_id; }, "max_token_id"},
      {[](AgenticWorkloadConfig& c) { c.min_token_id = -1; }, "min_token_id"},
  };
  for (const auto& k : cases) {
    AgenticWorkloadConfig c = small_config();
    k.edit(c);
    try {
      AgenticWorkload w(c);
      ADD_FAILURE() << "accepted a bad " << k.needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(k.needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace troupe::runtime
