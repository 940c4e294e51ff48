// A `troupe serve` daemon for the KV save-by-name tests (issue 14, docs/openai-api.md
// "Saved KV prefixes"): one rank (serve_kv_save_test.cpp) or R ranks
// (serve_kv_save_dep_test.cpp). The tiny golden checkpoint, 16-token blocks, a 1 MiB
// primary pool per rank, full compute (--no-bounded-replay: a restored snapshot's state
// equals a cold run's bit for bit), an API key; the greedy completion of a prompt (after a
// restored prefix, if named), a save, and the cold run every restore must equal.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net/http_test_client.h"
#include "support/test_paths.h"

namespace troupe::testing::kv_save {

using json = nlohmann::json;

inline const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
inline const std::string kKey = "kv-test-key";
inline const std::string kAuth = "Authorization: Bearer " + kKey + "\r\n";

// The daemon's flags: with the prefix cache, 128 KiB of pins (38 blocks per rank); with a
// disk_dir, 256 KiB of host tier and 4 MiB of block files in it (split among the ranks);
// `more` last (e.g. --data-parallel-size 2).
// A disk tier folder for this test process: <tmp>/<name>-<pid> (made by the daemon).
inline std::string temp_disk_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid())))
      .string();
}

inline std::vector<std::string> args(const std::string& disk_dir, bool prefix_cache = true,
                                     const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len",
                                "512", "--max-num-seqs", "2", "--block-size", "16",
                                "--kv-cache-memory-bytes", "1MiB", "--no-bounded-replay",
                                "--api-key", kKey};
  if (!prefix_cache) {
    a.push_back("--no-enable-prefix-caching");
  } else {
    a.insert(a.end(), {"--kv-pinned-bytes", "128KiB"});
    if (!disk_dir.empty())
      a.insert(a.end(), {"--kv-offload-bytes", "256KiB", "--kv-disk-dir", disk_dir,
                         "--kv-disk-bytes", "4MiB"});
  }
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

struct Running {
  explicit Running(std::vector<std::string> a) : d(std::move(a)) {
    port = d.port();
    ready = port != 0 && d.wait_ready(port);
  }
  HttpResponse post(const std::string& path, const json& body, bool auth = true) {
    return http(port, "POST", path, body.dump(), auth ? kAuth : "");
  }
  // The greedy completion of `prompt`, continuing `restore` if given.
  json complete(const std::vector<int32_t>& prompt, const std::string& restore = {}) {
    json body = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
    if (!restore.empty()) body["kv_restore"] = restore;
    const HttpResponse r = post("/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body) : json::object();
  }
  // /metrics once the figures include every finished request (they arrive with the
  // scheduler's stats reply, so the first scrape after a request may lag one step).
  std::string metrics() {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return http(port, "GET", "/metrics").body;
  }
  Daemon d;
  uint16_t port = 0;
  bool ready = false;
};

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline int64_t cached_tokens(const json& j) {
  return j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

inline std::string text_of(const json& j) {
  return j.value("choices", json::array()).empty() ? std::string()
                                                   : j["choices"][0]["text"].get<std::string>();
}

// The cold runs every restore must equal: each prompt on a one-rank daemon without a
// prefix cache (all of them on one daemon, the first time they are asked for).
inline std::vector<std::string> cold_texts(const std::vector<std::vector<int32_t>>& prompts) {
  static std::map<std::vector<int32_t>, std::string> done;
  std::vector<std::vector<int32_t>> missing;
  for (const auto& p : prompts)
    if (!done.count(p)) missing.push_back(p);
  if (!missing.empty()) {
    Running cold(args("", /*prefix_cache=*/false));
    EXPECT_TRUE(cold.ready) << cold.d.output();
    for (const auto& p : missing) done[p] = text_of(cold.complete(p));
    EXPECT_EQ(cold.d.stop(SIGTERM), 0);
  }
  std::vector<std::string> texts;
  for (const auto& p : prompts) texts.push_back(done[p]);
  return texts;
}

inline void save(Running& r, const std::string& id, const std::vector<int32_t>& tokens) {
  const HttpResponse s = r.post("/v1/kv/save", {{"conversation", id}, {"tokens", tokens}});
  ASSERT_EQ(s.status, 200) << s.body;
  const json j = json::parse(s.body);
  EXPECT_EQ(j["object"], "kv.saved");
  EXPECT_EQ(j["conversation"], id);
  EXPECT_EQ(j["prompt_tokens"], int64_t(tokens.size()));
}

}  // namespace troupe::testing::kv_save
