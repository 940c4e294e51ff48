// KV save by name through the daemon (issue 14, docs/kv-cache.md "Saved prefixes",
// docs/openai-api.md "Saved KV prefixes"): POST /v1/kv/save pins a prefix and its window
// snapshot under a name; "kv_restore" continues it with 0 replayed tokens and the tokens
// of a cold run (full compute: --no-bounded-replay, so a snapshot's state equals a cold
// run's bit for bit); a daemon restarted on the same --kv-disk-dir restores it from disk;
// eviction pressure never takes pinned blocks; unknown names are 404; delete unpins.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/kv_save_daemon.h"
#include "support/golden.h"
#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

using namespace kv_save;

// 200 saved tokens: 12 full 16-token blocks (B = 192) and 8 more; a 20-token next turn.
const std::vector<int32_t> kSaved = random_tokens(200, 1401);
const std::vector<int32_t> kTurn = random_tokens(20, 1402);

std::string disk_dir() { return temp_disk_dir("troupe-kv-save"); }

std::vector<std::string> args(bool tiers) { return kv_save::args(tiers ? disk_dir() : ""); }

// The cold run every restore must equal: the same prompt, no prefix cache at all.
std::string cold_text() { return cold_texts({concat(kSaved, kTurn)}).front(); }

TEST(ServeKvSave, RestoreReplaysNothingEqualsAColdRunAndSurvivesARestart) {
  const std::string cold = cold_text();
  ASSERT_FALSE(cold.empty());
  std::filesystem::remove_all(disk_dir());
  {
    Running r(args(/*tiers=*/true));
    ASSERT_TRUE(r.ready) << r.d.output();
    // The API key guards the KV routes like every other.
    EXPECT_EQ(r.post("/v1/kv/save", {{"conversation", "a"}, {"tokens", kSaved}}, false).status, 401);
    save(r, "conv-a", kSaved);
    const json hit = r.complete(kTurn, "conv-a");
    ASSERT_FALSE(hit.empty());
    EXPECT_EQ(hit["choices"][0]["text"], cold);
    EXPECT_EQ(hit["usage"]["prompt_tokens"], int64_t(kSaved.size() + kTurn.size()));
    EXPECT_EQ(cached_tokens(hit), 192);
    const std::string m = r.metrics();
    EXPECT_EQ(prometheus_value(m, "troupe:prefix_cache_replay_tokens_total"), 0) << m;
    EXPECT_GE(prometheus_value(m, "troupe:prefix_cache_snapshot_hits_total"), 1) << m;
    EXPECT_EQ(prometheus_value(m, "troupe:kv_restore_hits_total"), 1) << m;
    EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 1) << m;
    EXPECT_GT(prometheus_value(m, "troupe:kv_pinned_bytes"), 12 * 3000) << m;
    // 30 more blocks do not fit the 38-block budget next to conv-a's 12...
    const HttpResponse full =
        r.post("/v1/kv/save", {{"conversation", "big"}, {"tokens", random_tokens(480, 1403)}});
    EXPECT_EQ(full.status, 507) << full.body;
    EXPECT_NE(full.body.find("kv-pinned-bytes"), std::string::npos) << full.body;
    // ... and unknown names are a 404 that says so.
    const HttpResponse unknown = r.post(
        "/v1/completions", {{"prompt", kTurn}, {"max_tokens", 2}, {"kv_restore", "nope"}});
    EXPECT_EQ(unknown.status, 404) << unknown.body;
    EXPECT_EQ(json::parse(unknown.body)["error"]["message"], "no saved KV prefix named \"nope\"");
    EXPECT_EQ(http(r.port, "DELETE", "/v1/kv/nope", "", kAuth).status, 404);
    EXPECT_EQ(r.post("/v1/kv/save", {{"conversation", ""}, {"tokens", kSaved}}).status, 400);
    EXPECT_EQ(r.post("/v1/kv/save", {{"conversation", "x"}}).status, 400);
    // Saved twice, deleted once: the second name goes, the first stays for the restart.
    save(r, "conv-b", kSaved);
    const HttpResponse del = http(r.port, "DELETE", "/v1/kv/conv-b", "", kAuth);
    ASSERT_EQ(del.status, 200) << del.body;
    EXPECT_EQ(json::parse(del.body)["deleted"], true);
    EXPECT_EQ(r.post("/v1/completions", {{"prompt", kTurn}, {"kv_restore", "conv-b"}}).status, 404);
    EXPECT_EQ(r.d.stop(SIGTERM), 0) << r.d.output();
  }
  // The same disk dir: the index names conv-a, its blocks and snapshot come from disk.
  Running again(args(/*tiers=*/true));
  ASSERT_TRUE(again.ready) << again.d.output();
  const json hit = again.complete(kTurn, "conv-a");
  ASSERT_FALSE(hit.empty()) << again.d.output();
  EXPECT_EQ(hit["choices"][0]["text"], cold);
  EXPECT_EQ(cached_tokens(hit), 192);
  const std::string m = again.metrics();
  EXPECT_EQ(series_with(m, "troupe:prefix_cache_hits_total", "tier=\"disk\""), 192) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:prefix_cache_replay_tokens_total"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 1) << m;
  EXPECT_EQ(http(again.port, "DELETE", "/v1/kv/conv-b", "", kAuth).status, 404);
  EXPECT_EQ(again.d.stop(SIGTERM), 0) << again.d.output();
  std::filesystem::remove_all(disk_dir());
}

TEST(ServeKvSave, EvictionPressureNeverTakesPinnedBlocksAndDeleteUnpins) {
  const std::string cold = cold_text();
  ASSERT_FALSE(cold.empty());
  Running r(args(/*tiers=*/false));  // no tiers: an evicted block is gone
  ASSERT_TRUE(r.ready) << r.d.output();
  save(r, "pinned", kSaved);
  auto pressure = [&](uint32_t seed) {  // 8 x 30 blocks through a 236-block pool
    for (uint32_t i = 0; i < 8; ++i) r.complete(random_tokens(480, seed + i));
  };
  pressure(2000);
  const json hit = r.complete(kTurn, "pinned");
  ASSERT_FALSE(hit.empty());
  EXPECT_EQ(cached_tokens(hit), 192) << "the pinned blocks survived the pressure";
  EXPECT_EQ(hit["choices"][0]["text"], cold);
  const HttpResponse del = r.post("/v1/kv/delete", {{"conversation", "pinned"}});
  ASSERT_EQ(del.status, 200) << del.body;
  std::string m = r.metrics();
  EXPECT_EQ(prometheus_value(m, "troupe:kv_saved_prefixes"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:kv_pinned_bytes"), 0) << m;
  // Unpinned, the same prefix is evicted like any other.
  pressure(3000);
  const json after = r.complete(concat(kSaved, kTurn));
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(cached_tokens(after), 0);
  EXPECT_EQ(after["choices"][0]["text"], cold);
  EXPECT_EQ(r.d.stop(SIGTERM), 0) << r.d.output();
}

}  // namespace
}  // namespace troupe::testing
