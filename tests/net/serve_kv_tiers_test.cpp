// `troupe serve` with the host and disk KV tiers (issue 14, docs/kv-cache.md "Host and
// disk tiers"): a pool of 236 16-token blocks, eight 480-token prompts (240 blocks), each
// sent twice. The second round's prefixes were evicted from the pool: they come back from
// the host or disk tier, the greedy outputs equal the first round's, the usage reports
// them as cached tokens, and /metrics splits the hits by tier and shows each tier's bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "net/http_test_client.h"
#include "support/golden.h"
#include "support/prometheus_text.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

std::string disk_dir() {
  static const std::string d =
      (std::filesystem::temp_directory_path() / ("troupe-serve-kv-" + std::to_string(::getpid())))
          .string();
  return d;
}

class ServeKvTiers : public DaemonSuite<ServeKvTiers> {
 public:
  static std::vector<std::string> daemon_args() {
    std::filesystem::remove_all(disk_dir());
    return {kModelDir,       "--port",          "0",      "--tcp-port",
            "0",             "--max-model-len", "512",    "--max-num-seqs",
            "2",             "--block-size",    "16",     "--kv-cache-memory-bytes",
            "1MiB",          "--kv-offload-bytes", "256KiB", "--kv-disk-dir",
            disk_dir(),      "--kv-disk-bytes", "4MiB"};
  }
  static void TearDownTestSuite() {
    DaemonSuite::TearDownTestSuite();
    std::filesystem::remove_all(disk_dir());
  }
};

TEST_F(ServeKvTiers, EvictedPrefixesComeBackFromHostAndDiskWithTheSameOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(random_tokens(480, 300 + i));
  std::vector<std::string> first;
  int64_t cached_second = 0;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const json body = {{"model", "v41-tiny-seed7"}, {"prompt", prompts[i]},
                         {"max_tokens", 4},           {"temperature", 0},
                         {"ignore_eos", true}};
      const HttpResponse r = DaemonSuite::post("/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = json::parse(r.body);
      const std::string text = j["choices"][0]["text"];
      if (round == 0) {
        first.push_back(text);
      } else {
        EXPECT_EQ(text, first[i]) << "prompt " << i;
        cached_second += j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
      }
    }
  }
  EXPECT_GE(cached_second, 8 * 400) << "most of every prefix came from some tier";
  // The figures reach /metrics with the scheduler's next stats reply: poll a little.
  std::string m = http(port_, "GET", "/metrics").body;
  for (int i = 0; i < 500 && series_with(m, "troupe:kv_cache_tier_bytes", "tier=\"disk\"") <= 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = http(port_, "GET", "/metrics").body;
  }
  const double host = series_with(m, "troupe:prefix_cache_hits_total", "tier=\"host\"");
  const double disk = series_with(m, "troupe:prefix_cache_hits_total", "tier=\"disk\"");
  const double primary = series_with(m, "troupe:prefix_cache_hits_total", "tier=\"primary\"");
  EXPECT_GT(host + disk, 0) << m;
  EXPECT_EQ(primary + host + disk, prometheus_value(m, "troupe:prefix_cache_hits_total")) << m;
  EXPECT_GT(series_with(m, "troupe:kv_cache_tier_bytes", "tier=\"host\""), 0) << m;
  EXPECT_GT(series_with(m, "troupe:kv_cache_tier_bytes", "tier=\"disk\""), 0) << m;
}

}  // namespace
}  // namespace troupe::testing
