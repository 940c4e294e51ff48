// Cache-aware routing in the cluster router (docs/pd.md "Cache-aware routing"), in one
// process: two mixed engines. A follow-up prompt that extends one an engine served goes to
// that engine (its prefix cache holds it) even though the other is the router's default
// pick (equal load, the lower slot). Tokens equal a plain Engine's that ran the same
// prompts in the same order (a prefix hit under bounded replay continues the earlier
// request's window state, so a follow-up's reference is not a cold run: kv-cache.md).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "actors/engine_actors.h"
#include "actors/in_process_cluster.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::greedy;
using testing::golden_model;
using testing::random_tokens;

// The greedy tokens of the last prompt on one Engine that ran `prompts` one after another.
std::vector<int32_t> after(const runtime::EngineConfig& config,
                           const std::vector<std::vector<int32_t>>& prompts) {
  runtime::Engine e(*golden_model().forward, nullptr, config);
  std::vector<int32_t> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    e.add_request(runtime::RequestId(i), prompts[i], greedy(4));
    out.clear();
    while (e.has_unfinished())
      for (const auto& o : e.step()) out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
  }
  return out;
}

TEST(CacheAwareRouting, AFollowUpGoesWhereItsPrefixIsCached) {
  caf::actor_system_config cfg;
  caf::actor_system sys(cfg);
  const runtime::EngineConfig config = runtime::golden_engine_config(32 << 20, true, 64, 8);
  InProcessCluster cluster(sys, config, {{"m1", EngineRole::Mixed}, {"m2", EngineRole::Mixed}});
  const scheduler_actor m1 = cluster.engines[0], m2 = cluster.engines[1];
  const router_actor router = cluster.router;
  caf::scoped_actor self{sys};
  auto stats = [&](const scheduler_actor& e) { return figures_of(self, e); };
  // Tokens of each request until all have finished.
  using Reference = std::vector<std::vector<int32_t>>;  // prompts run before, then this one
  auto run = [&](const std::vector<std::pair<runtime::RequestId, std::vector<int32_t>>>& reqs,
                 const Reference& before = {}) {
    std::map<runtime::RequestId, std::vector<int32_t>> tokens;
    for (const auto& [id, prompt] : reqs)
      self->send(router, generate_atom::value, GenerateRequest{id, prompt, greedy(4), {}},
                 caf::actor{self});
    for (size_t done = 0; done < reqs.size();)
      self->receive(
          [&](token_atom, const TokenEvent& e) {
            auto& t = tokens[e.output.id];
            t.insert(t.end(), e.output.new_tokens.begin(), e.output.new_tokens.end());
            done += e.output.finished();
            EXPECT_NE(e.output.status, runtime::RequestStatus::FinishedError) << e.output.error;
          },
          caf::after(std::chrono::seconds(60)) >> [&] {
            ADD_FAILURE() << "timed out";
            done = reqs.size();
          });
    for (const auto& [id, prompt] : reqs) {
      Reference prompts = before;
      prompts.push_back(prompt);
      EXPECT_EQ(tokens[id], after(config, prompts)) << "request " << id;
    }
  };
  // Two at once: the first to m1, the second (m1 busier) to m2.
  const std::vector<int32_t> a = random_tokens(40, 501), b = random_tokens(40, 502);
  run({{1, a}, {2, b}});
  const int64_t m1_hits = stats(m1).prefix_hit_tokens, m2_hits = stats(m2).prefix_hit_tokens;
  ASSERT_EQ(stats(m2).prefix_query_tokens, 40);  // b ran there
  // b's follow-up: both idle, so without the probe it would go to m1 (the lower slot).
  std::vector<int32_t> b2 = b;
  for (int32_t t : random_tokens(9, 503)) b2.push_back(t);
  run({{3, b2}}, {b});
  EXPECT_EQ(stats(m1).prefix_hit_tokens, m1_hits);
  EXPECT_EQ(stats(m2).prefix_hit_tokens, m2_hits + 32);  // b's two full blocks
  // a's follow-up likewise goes back to m1.
  std::vector<int32_t> a2 = a;
  for (int32_t t : random_tokens(5, 504)) a2.push_back(t);
  run({{4, a2}}, {a});
  EXPECT_EQ(stats(m1).prefix_hit_tokens, m1_hits + 32);
}

}  // namespace
}  // namespace troupe::actors
