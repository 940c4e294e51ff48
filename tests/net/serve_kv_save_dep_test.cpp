// KV save by name through a daemon of two ranks (`troupe serve --data-parallel-size 2`,
// issue 14 on issue 10's ranks; docs/openai-api.md "Saved KV prefixes"): each rank owns
// its tiers and its saved prefixes, in its own folder of --kv-disk-dir (rank-<r>). A
// save pins on the rank the load balance picks (here one per rank: rank 0 is kept busy
// while conv-b is saved); a restore, a delete and a second save of a name reach the rank
// holding it, whatever the loads (the second save runs while rank 0 is busy) (without that, an idle pair sends everything to rank 0,
// which would answer 404 for conv-b). Restores replay 0 tokens and equal a cold run; a
// daemon restarted on the same folder finds each name in its rank's folder and restores
// it from that rank's disk tier. Unknown names stay 404.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "net/kv_save_daemon.h"
#include "runtime/kv_cache/pin_index.h"
#include "support/golden.h"
#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

using namespace kv_save;

// Two saved prefixes of 200 tokens (12 full 16-token blocks: B = 192) and a next turn.
const std::vector<int32_t> kSavedA = random_tokens(200, 1501);
const std::vector<int32_t> kSavedB = random_tokens(200, 1502);
const std::vector<int32_t> kTurn = random_tokens(20, 1503);

std::string disk_dir() { return temp_disk_dir("troupe-kv-save-dp"); }

std::vector<std::string> dp2_args() {
  return args(disk_dir(), true, {"--data-parallel-size", "2"});
}

// The rank whose folder's index names `name` (-1: none), once the index caught up with
// the reply (the scheduler writes it right after the step that pinned or unpinned it).
int rank_holding(const std::string& name, int expected) {
  int found = -1;
  for (int i = 0; i < 100; ++i) {
    found = -1;
    for (int r = 0; r < 2; ++r)
      for (const runtime::SavedPrefix& p :
           runtime::read_pin_index(disk_dir() + "/rank-" + std::to_string(r)))
        if (p.name == name) found = r;
    if (found == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return found;
}

// Runs `fn` while rank 0 serves a long completion, so the load balance sends a new
// request to rank 1 unless a rank holds the name it names.
void while_rank0_busy(Running& r, const std::function<void()>& fn) {
  std::thread busy([&] {
    r.post("/v1/completions", {{"prompt", random_tokens(20, 1504)},
                               {"max_tokens", 400},
                               {"temperature", 0},
                               {"ignore_eos", true}});
  });
  bool running = false;
  for (int i = 0; i < 100 && !running; ++i)
    running = series_with(r.metrics(), "troupe:num_requests_running", "rank=\"0\"") >= 1;
  EXPECT_TRUE(running) << "the long completion never ran on rank 0";
  fn();
  busy.join();
}

void expect_restore(Running& r, const std::string& name, const std::string& cold) {
  const json hit = r.complete(kTurn, name);
  ASSERT_FALSE(hit.empty()) << name;
  EXPECT_EQ(hit["choices"][0]["text"], cold) << name;
  EXPECT_EQ(cached_tokens(hit), 192) << name;
}

TEST(ServeKvSaveDep, ANameLivesOnOneRankItsRestoresReachItAndARestartFindsItInThatRanksFolder) {
  const std::vector<std::string> cold =
      cold_texts({concat(kSavedA, kTurn), concat(kSavedB, kTurn)});
  ASSERT_FALSE(cold[0].empty());
  ASSERT_NE(cold[0], cold[1]);
  std::filesystem::remove_all(disk_dir());
  {
    Running r(dp2_args());
    ASSERT_TRUE(r.ready) << r.d.output();
    while_rank0_busy(r, [&] { save(r, "conv-b", kSavedB); });
    save(r, "conv-a", kSavedA);  // both ranks idle: rank 0
    EXPECT_EQ(rank_holding("conv-b", 1), 1);
    EXPECT_EQ(rank_holding("conv-a", 0), 0);
    expect_restore(r, "conv-b", cold[1]);
    expect_restore(r, "conv-a", cold[0]);
    const std::string m = r.metrics();
    EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 2) << m;
    EXPECT_EQ(prometheus_value(m, "troupe:prefix_cache_replay_tokens_total"), 0) << m;
    EXPECT_EQ(prometheus_value(m, "troupe:kv_restore_hits_total"), 2) << m;
    // Unknown names: 404 as with one rank.
    const HttpResponse unknown = r.post(
        "/v1/completions", {{"prompt", kTurn}, {"max_tokens", 2}, {"kv_restore", "nope"}});
    EXPECT_EQ(unknown.status, 404) << unknown.body;
    EXPECT_EQ(http(r.port, "DELETE", "/v1/kv/nope", "", kAuth).status, 404);
    EXPECT_EQ(r.d.stop(SIGTERM), 0) << r.d.output();
  }
  EXPECT_FALSE(std::filesystem::exists(runtime::pin_index_path(disk_dir())))
      << "an index outside the ranks' folders";
  // The same folder: each rank's index and block files come back on that rank.
  Running again(dp2_args());
  ASSERT_TRUE(again.ready) << again.d.output();
  expect_restore(again, "conv-b", cold[1]);
  expect_restore(again, "conv-a", cold[0]);
  std::string m = again.metrics();
  EXPECT_EQ(series_with(m, "troupe:prefix_cache_hits_total", "tier=\"disk\""), 2 * 192) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:prefix_cache_replay_tokens_total"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 2) << m;
  // A delete reaches rank 1 and unpins there; then the name is unknown everywhere.
  const HttpResponse del = http(again.port, "DELETE", "/v1/kv/conv-b", "", kAuth);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(rank_holding("conv-b", -1), -1);
  EXPECT_EQ(again.post("/v1/completions", {{"prompt", kTurn}, {"kv_restore", "conv-b"}}).status, 404);
  EXPECT_EQ(http(again.port, "DELETE", "/v1/kv/conv-b", "", kAuth).status, 404);
  // Saved again while rank 0 is busy: to rank 0, which holds the name, replaced there.
  while_rank0_busy(again, [&] { save(again, "conv-a", kSavedA); });
  EXPECT_EQ(rank_holding("conv-a", 0), 0);
  m = again.metrics();
  EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 1) << m;
  EXPECT_EQ(again.d.stop(SIGTERM), 0) << again.d.output();
  std::filesystem::remove_all(disk_dir());
}

}  // namespace
}  // namespace troupe::testing
