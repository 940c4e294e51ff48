// ServeConfig: the example file equals the defaults; every key parses from YAML and from
// flags; every kind of bad input gives a message naming the key and the file (and line)
// or the flag; flags override the file; to_engine_config maps each field.
#include "config/serve_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.h"
#include "config/serve_keys.h"
#include "kernels/check.h"
#include "support/error_of.h"
#include "kernels/parallel.h"
#include "model/temp_dir.h"
#include "support/test_paths.h"

namespace troupe::config {

// gtest prints a ServeConfig that differs as its YAML, not as bytes.
void PrintTo(const ServeConfig& cfg, std::ostream* os) {
  *os << "\n" << to_yaml(cfg);
}

namespace {

const std::string kRepo = std::string(TROUPE_TEST_DATA) + "/../..";
const std::string kExample = kRepo + "/config/examples/single-node.yaml";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

using test::error_of;

ServeConfig from_yaml(const std::string& text, KeyOrigins* origins = nullptr) {
  ServeConfig cfg;
  apply_serve_config_yaml(cfg, text, "cfg.yaml", origins);
  return cfg;
}

// A value different from the default for every key, and the struct it must give.
const char* kEveryKey = R"(model: /models/v41
served-model-name: flash
host: 0.0.0.0
port: 9000
tcp-port: 0
api-key: "s3cret: \"x\""
max-body-bytes: 1.5MiB
tcp-max-buffered-bytes: 512MiB
request-timeout: 500ms
http-header-timeout: 2s
http-body-timeout: 1m
http-idle-timeout: 250ms
max-connections: 7
max-queued-output-bytes: 64KiB
write-timeout: 5s
log-level: debug
max-engine-restarts: 0
engine-restart-window: 10m
max-model-len: 32768
max-num-seqs: 16
max-num-batched-tokens: 40960
max-prefill-context-read: 65536
max-admissions-per-step: 4
max-kv-loads-per-step: 2
enable-chunked-prefill: off
scheduling-policy: priority
async-scheduling: false
kv-cache-memory-bytes: 3GB
block-size: 128
enable-prefix-caching: false
enable-prefix-snapshots: off
kv-offload-bytes: 2GiB
kv-disk-dir: /var/cache/troupe-kv
kv-disk-bytes: 100GB
kv-check-invariants: true
bounded-replay: no
clip-prefix: yes
prefix-replay: window
threads: 2
speculative-config: '{"method": "dspark", "num_speculative_tokens": 3}'
)";

ServeConfig every_key_expected() {
  ServeConfig c;
  c.model = "/models/v41";
  c.served_model_name = "flash";
  c.host = "0.0.0.0";
  c.port = 9000;
  c.tcp_port = 0;
  c.api_key = "s3cret: \"x\"";
  c.max_body_bytes = 1536 * 1024;
  c.tcp_max_buffered_bytes = int64_t(512) << 20;
  c.request_timeout = 0.5;
  c.http_header_timeout = 2;
  c.http_body_timeout = 60;
  c.http_idle_timeout = 0.25;
  c.max_connections = 7;
  c.max_queued_output_bytes = 64 << 10;
  c.write_timeout = 5;
  c.max_engine_restarts = 0;
  c.engine_restart_window = 600;
  c.log_level = LogLevel::Debug;
  c.max_model_len = 32768;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 40960;
  c.max_prefill_context_read = 65536;
  c.max_admissions_per_step = 4;
  c.max_kv_loads_per_step = 2;
  c.enable_chunked_prefill = false;
  c.scheduling_policy = runtime::SchedulePolicy::Priority;
  c.async_scheduling = false;
  c.kv_cache_memory_bytes = 3'000'000'000;
  c.block_size = 128;
  c.enable_prefix_caching = false;
  c.enable_prefix_snapshots = false;
  c.kv_offload_bytes = int64_t(2) << 30;
  c.kv_disk_dir = "/var/cache/troupe-kv";
  c.kv_disk_bytes = 100'000'000'000;
  c.kv_check_invariants = true;
  c.bounded_replay = false;
  c.clip_prefix = true;
  c.prefix_replay = runtime::PrefixReplay::Window;
  c.threads = 2;
  c.speculative_config = R"({"method": "dspark", "num_speculative_tokens": 3})";
  return c;
}

TEST(ServeConfig, ExampleFileEqualsTheDefaultsAndListsEveryKey) {
  EXPECT_EQ(load_serve_config_file(kExample), ServeConfig{});
  KeyOrigins origins;
  from_yaml(read(kExample), &origins);
  for (const ConfigKey& k : serve_config_keys()) EXPECT_TRUE(origins.count(k.name)) << k.name;
  EXPECT_EQ(origins.size(), serve_config_keys().size());
}

TEST(ServeConfig, DocsMentionEveryKey) {
  const std::string doc = read(kRepo + "/docs/config.md");
  for (const ConfigKey& k : serve_config_keys())
    EXPECT_NE(doc.find("`" + k.name + "`"), std::string::npos) << k.name;
}

TEST(ServeConfig, EveryKeyParsesFromYaml) {
  const ServeConfig want = every_key_expected();
  const ServeConfig got = from_yaml(kEveryKey);
  EXPECT_EQ(got, want);
  EXPECT_EQ(error_of([&] { got.validate(); }), "");
  // Each field differs from its default, so no key is silently ignored by the test.
  const ServeConfig d;
  EXPECT_NE(want.model, d.model);
  EXPECT_NE(want.port, d.port);
  EXPECT_NE(want.max_body_bytes, d.max_body_bytes);
  EXPECT_NE(want.kv_cache_memory_bytes, d.kv_cache_memory_bytes);
  EXPECT_NE(want.threads, d.threads);
}

TEST(ServeConfig, ToYamlReadsBackToTheSameConfig) {
  for (const ServeConfig& c : {ServeConfig{}, every_key_expected()}) {
    EXPECT_EQ(from_yaml(to_yaml(c)), c) << to_yaml(c);
  }
  EXPECT_NE(to_yaml(ServeConfig{}).find("kv-cache-memory-bytes: 1GiB\n"), std::string::npos);
}

TEST(ServeConfig, EveryKeyParsesFromFlags) {
  std::map<std::string, std::string> flags;
  ServeConfig want = every_key_expected();
  for (const ConfigKey& k : serve_config_keys()) {
    if (k.kind == ValueKind::Bool) continue;
    flags[k.name] = k.get(want);
  }
  flags["no-enable-chunked-prefill"] = "1";  // as cli::Args stores a boolean flag
  flags["no-enable-prefix-caching"] = "1";
  flags["no-enable-prefix-snapshots"] = "1";
  flags["no-bounded-replay"] = "1";
  flags["clip-prefix"] = "1";
  flags["no-async-scheduling"] = "1";
  flags["kv-check-invariants"] = "1";
  ServeConfig got;
  apply_serve_flags(got, flags);
  EXPECT_EQ(got, want);
  // K sets, no-K clears; K=false (a map not from cli::Args) also works.
  apply_serve_flags(got, {{"enable-prefix-caching", "1"}, {"bounded-replay", "true"}});
  EXPECT_TRUE(got.enable_prefix_caching);
  EXPECT_TRUE(got.bounded_replay);
  apply_serve_flags(got, {{"enable-prefix-caching", "false"}});
  EXPECT_FALSE(got.enable_prefix_caching);
}

TEST(ServeConfig, EmptyDocumentKeepsDefaults) {
  for (const char* text : {"", "# only a comment\n", "---\n"})
    EXPECT_EQ(from_yaml(text), ServeConfig{}) << "'" << text << "'";
}

struct BadYaml {
  std::string text, message;
};

TEST(ServeConfig, BadYamlNamesKeyFileAndLine) {
  const std::vector<BadYaml> cases = {
      {"port: 70000", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got '70000'"},
      {"port: -1", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got '-1'"},
      {"port: abc", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got 'abc'"},
      {"port: 80.5", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got '80.5'"},
      {"port: [1, 2]", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got a list"},
      {"host: {a: 1}", "cfg.yaml:1: key 'host' expects a non-empty string, got a map"},
      {"host: ''", "cfg.yaml:1: key 'host' expects a non-empty string, got ''"},
      {"port:", "cfg.yaml:1: key 'port' expects an integer in [0, 65535], got no value"},
      {"max-num-seqs: 0", "cfg.yaml:1: key 'max-num-seqs' expects an integer >= 1, got '0'"},
      {"max-model-len: 1", "cfg.yaml:1: key 'max-model-len' expects an integer >= 2, got '1'"},
      {"threads: 5000", "cfg.yaml:1: key 'threads' expects an integer in [0, 4096], got '5000'"},
      {"kv-cache-memory-bytes: 2XB",
       "cfg.yaml:1: key 'kv-cache-memory-bytes' expects a size >= 1 in bytes, or with a unit "
       "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got '2XB'"},
      {"max-body-bytes: 0",
       "cfg.yaml:1: key 'max-body-bytes' expects a size >= 1 in bytes, or with a unit "
       "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got '0'"},
      {"request-timeout: -3",
       "cfg.yaml:1: key 'request-timeout' expects a duration >= 0 in seconds, or with a unit "
       "(ms, s, m, h), got '-3'"},
      {"enable-prefix-caching: maybe",
       "cfg.yaml:1: key 'enable-prefix-caching' expects true or false, got 'maybe'"},
      {"log-level: loud",
       "cfg.yaml:1: key 'log-level' expects one of trace debug info warning error critical, "
       "got 'loud'"},
      {"scheduling-policy: lifo",
       "cfg.yaml:1: key 'scheduling-policy' expects one of fcfs priority, got 'lifo'"},
      {"max_num_seqs: 4", "cfg.yaml:1: unknown key 'max_num_seqs' (did you mean 'max-num-seqs'?)"},
      {"colour: red", "cfg.yaml:1: unknown key 'colour'"},
      {"# comment\nport: 1\n\ntcp-port: x",
       "cfg.yaml:4: key 'tcp-port' expects an integer in [0, 65535], got 'x'"},
      {"port: 1\nhost: a\nport: 2", "cfg.yaml:3: key 'port' is set twice (first on line 1)"},
      {"- port\n- host", "cfg.yaml:1: expected 'key: value' lines at the top level, got a list"},
      {"hello", "cfg.yaml:1: expected 'key: value' lines at the top level, got a single value"},
      {"[a, b]: 1", "cfg.yaml:1: a key must be a plain name"},
  };
  for (const auto& c : cases) {
    ServeConfig cfg;
    EXPECT_EQ(error_of([&] { apply_serve_config_yaml(cfg, c.text, "cfg.yaml"); }), c.message)
        << c.text;
  }
}

TEST(ServeConfig, YamlSyntaxErrorHasLineAndColumn) {
  const std::string msg = error_of([] { from_yaml("port: 1\nhost: [a, b\n"); });
  EXPECT_EQ(msg.rfind("cfg.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
}

TEST(ServeConfig, BadValueLeavesConfigUnchanged) {
  ServeConfig cfg;
  cfg.port = 1234;
  EXPECT_NE(error_of([&] { apply_serve_flags(cfg, {{"port", "x"}}); }), "");
  EXPECT_EQ(cfg.port, 1234);
}

TEST(ServeConfig, BadFlagsNameTheFlag) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"port", "x"}}, "flag --port expects an integer in [0, 65535], got 'x'"},
      {{{"max-num-seqs", "-4"}}, "flag --max-num-seqs expects an integer >= 1, got '-4'"},
      {{{"kv-cache-memory-bytes", "lots"}},
       "flag --kv-cache-memory-bytes expects a size >= 1 in bytes, or with a unit (B, KB, MB, "
       "GB, TB, KiB, MiB, GiB, TiB), got 'lots'"},
      {{{"enable-prefix-caching", "2"}},
       "flag --enable-prefix-caching expects true or false, got '2'"},
      {{{"no-enable-prefix-caching", "x"}},
       "flag --no-enable-prefix-caching takes no value, got 'x'"},
      {{{"prot", "1"}}, "unknown flag --prot (did you mean '--port'?)"},
      {{{"no-port", "1"}}, "unknown flag --no-port (did you mean '--port'?)"},
      {{{"gpu-memory-utilization", "0.9"}}, "unknown flag --gpu-memory-utilization"},
  };
  for (const auto& [flags, message] : cases) {
    ServeConfig cfg;
    EXPECT_EQ(error_of([&] { apply_serve_flags(cfg, flags); }), message);
  }
}

TEST(ServeConfig, FlagsOverrideTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("serve.yaml");
  write(path, "port: 9000\nmax-num-seqs: 8\nmax-admissions-per-step: 8\n");
  const ServeConfig cfg = resolve_serve_config({{"config", path},
                                                {"model", "/m"},
                                                {"port", "9100"},
                                                {"no-enable-prefix-caching", "1"},
                                                {"kv-cache-memory-bytes", "2GiB"}});
  EXPECT_EQ(cfg.port, 9100);       // flag over file
  EXPECT_EQ(cfg.max_num_seqs, 8);  // file over default
  EXPECT_EQ(cfg.model, "/m");      // the MODEL_DIR positional, as the serve command passes it
  EXPECT_FALSE(cfg.enable_prefix_caching);
  EXPECT_EQ(cfg.kv_cache_memory_bytes, int64_t(2) << 30);
  EXPECT_EQ(cfg.host, "127.0.0.1");  // default
  EXPECT_EQ(resolve_serve_config({}), ServeConfig{});
}

TEST(ServeConfig, FileErrorsNameThePath) {
  test::TempDir dir;
  const std::string path = dir.file("bad.yaml");
  write(path, "host: 127.0.0.1\nblock-size: 0\n");
  EXPECT_EQ(error_of([&] {
              resolve_serve_config({{"config", path}});
            }),
            path + ":2: key 'block-size' expects an integer in [1, 1048576], got '0'");
  EXPECT_EQ(error_of([&] { load_serve_config_file(path); }),
            path + ":2: key 'block-size' expects an integer in [1, 1048576], got '0'");
  const std::string missing = dir.file("missing.yaml");
  EXPECT_EQ(error_of([&] {
              resolve_serve_config({{"config", missing}});
            }),
            "config file '" + missing + "' cannot be read");
}

TEST(ServeConfig, RulesBetweenKeysNameBothKeysAndWhereTheyWereSet) {
  test::TempDir dir;
  const std::string path = dir.file("serve.yaml");
  write(path, "enable-chunked-prefill: false\nmax-model-len: 10000\n");
  EXPECT_EQ(error_of([&] { load_serve_config_file(path); }),
            "max-num-batched-tokens = 8192 must be >= max-model-len (" + path +
                " line 2) = 10000 when enable-chunked-prefill is false: a longer prompt could "
                "never be scheduled");
  // A flag fixes it; a flag that breaks the other rule is named as a flag.
  EXPECT_EQ(error_of([&] {
              resolve_serve_config({{"config", path}, {"max-num-batched-tokens", "10000"}});
            }),
            "");
  EXPECT_EQ(error_of([&] {
              resolve_serve_config({{"max-model-len", "9000"},
                                    {"no-enable-chunked-prefill", "1"},
                                    {"max-num-batched-tokens", "4096"}});
            }),
            "max-num-batched-tokens (flag --max-num-batched-tokens) = 4096 must be >= "
            "max-model-len (flag --max-model-len) = 9000 when enable-chunked-prefill is false: a "
            "longer prompt could never be scheduled");
  // One key alone never trips over another's default: admissions above max-num-seqs are
  // merely capped by the running limit.
  EXPECT_EQ(error_of([&] { resolve_serve_config({{"max-num-seqs", "16"}}); }), "");
}

TEST(ServeConfig, ToEngineConfigMapsEveryField) {
  const runtime::EngineConfig e = every_key_expected().to_engine_config();
  EXPECT_EQ(e.scheduler.max_num_batched_tokens, 40960);
  EXPECT_EQ(e.scheduler.max_num_running, 16);
  EXPECT_EQ(e.scheduler.max_prefill_context_read, 65536);
  EXPECT_EQ(e.scheduler.max_admissions_per_step, 4);
  EXPECT_EQ(e.scheduler.max_model_len, 32768);
  EXPECT_FALSE(e.scheduler.enable_chunked_prefill);
  EXPECT_EQ(e.scheduler.policy, runtime::SchedulePolicy::Priority);
  EXPECT_FALSE(e.async_scheduling);
  EXPECT_EQ(e.kv_budget_bytes, 3'000'000'000);
  EXPECT_EQ(e.block_size, 128);
  EXPECT_FALSE(e.enable_prefix_cache);
  EXPECT_FALSE(e.executor.bounded_replay);
  EXPECT_TRUE(e.executor.clip_prefix);
  EXPECT_EQ(e.executor.prefix_replay, runtime::PrefixReplay::Window);
  EXPECT_EQ(e.kv_offload_bytes, int64_t(2) << 30);
  EXPECT_EQ(e.kv_disk_dir, "/var/cache/troupe-kv");
  EXPECT_EQ(e.kv_disk_bytes, 100'000'000'000);
  EXPECT_EQ(e.kv_disk_tag, "/models/v41");  // another checkpoint's files are foreign
  EXPECT_TRUE(e.scheduler.check_kv_invariants);
  // The defaults are the runtime's own defaults: serving without a config changes nothing.
  const runtime::EngineConfig d = ServeConfig{}.to_engine_config();
  const runtime::EngineConfig r;
  EXPECT_EQ(d.scheduler.max_num_batched_tokens, r.scheduler.max_num_batched_tokens);
  EXPECT_EQ(d.scheduler.max_num_running, r.scheduler.max_num_running);
  EXPECT_EQ(d.scheduler.max_prefill_context_read, r.scheduler.max_prefill_context_read);
  EXPECT_EQ(d.scheduler.max_admissions_per_step, r.scheduler.max_admissions_per_step);
  EXPECT_EQ(d.scheduler.max_model_len, r.scheduler.max_model_len);
  EXPECT_EQ(d.scheduler.enable_chunked_prefill, r.scheduler.enable_chunked_prefill);
  EXPECT_EQ(d.scheduler.policy, r.scheduler.policy);
  EXPECT_EQ(d.async_scheduling, r.async_scheduling);
  EXPECT_EQ(d.kv_budget_bytes, r.kv_budget_bytes);
  EXPECT_EQ(d.block_size, r.block_size);
  EXPECT_EQ(d.enable_prefix_cache, r.enable_prefix_cache);
  EXPECT_EQ(d.executor.bounded_replay, r.executor.bounded_replay);
  EXPECT_EQ(d.executor.prefix_replay, r.executor.prefix_replay);
}

// The DEP-R keys: redundant experts only with expert parallelism; tiers with any ranks.
TEST(ServeConfig, DepKeysAreCheckedTogether) {
  const struct {
    const char* yaml;
    const char* message;  // "" : valid
  } cases[] = {
      {"data-parallel-size: 3\nenable-expert-parallel: true\nnum-redundant-experts: 2", ""},
      {"data-parallel-size: 2", ""},
      {"num-redundant-experts: 2",
       "num-redundant-experts (cfg.yaml line 1) = 2 needs enable-expert-parallel = true: without "
       "expert parallelism every rank holds every expert"},
      // Each rank owns its share of the tiers (runtime/dep/rank_tiers.h).
      {"data-parallel-size: 2\nkv-offload-bytes: 1GiB", ""},
      {"data-parallel-size: 3\nenable-expert-parallel: true\nkv-offload-bytes: 1GiB\n"
       "kv-disk-dir: /tmp/kv\nkv-disk-bytes: 10GB", ""},
  };
  for (const auto& c : cases) {
    std::map<std::string, std::string> origins;
    ServeConfig cfg;
    apply_serve_config_yaml(cfg, c.yaml, "cfg.yaml", &origins);
    EXPECT_EQ(error_of([&] { cfg.validate(origins); }), c.message) << c.yaml;
  }
  ServeConfig cfg;
  EXPECT_NE(error_of([&] { apply_serve_config_yaml(cfg, "data-parallel-size: 0", "cfg.yaml"); }), "");
}

// Live EPLB: only with expert parallelism; its JSON's keys and values checked by name;
// the redundant slots from either key, never two different numbers.
TEST(ServeConfig, EplbKeysAreCheckedTogether) {
  const struct {
    const char* yaml;
    const char* message;  // "" : valid
  } cases[] = {
      {"data-parallel-size: 2\nenable-expert-parallel: true\nenable-eplb: true", ""},
      {"enable-expert-parallel: true\nenable-eplb: true\n"
       "eplb-config: '{\"window_size\": 10, \"step_interval\": 20, \"num_redundant_experts\": 2}'",
       ""},
      {"enable-eplb: true",
       "enable-eplb (cfg.yaml line 1) needs enable-expert-parallel = true: the placement it "
       "balances spreads the experts over the ranks"},
      {"enable-expert-parallel: true\neplb-config: '{}'",
       "eplb-config (cfg.yaml line 2) is set but enable-eplb is false"},
      {"enable-expert-parallel: true\nenable-eplb: true\neplb-config: '{\"window\": 3}'",
       "eplb-config (cfg.yaml line 3): eplb-config: unknown key \"window\" (known: window_size, "
       "step_interval, num_redundant_experts)"},
      {"enable-expert-parallel: true\nenable-eplb: true\neplb-config: '{\"step_interval\": 0}'",
       "eplb-config (cfg.yaml line 3): eplb-config: \"step_interval\" must be an integer in [1, "
       "1099511627776], got 0"},
      {"enable-expert-parallel: true\nenable-eplb: true\neplb-config: '[1'",
       nullptr},  // not JSON: some message
      {"enable-expert-parallel: true\nnum-redundant-experts: 2\nenable-eplb: true\n"
       "eplb-config: '{\"num_redundant_experts\": 4}'",
       "eplb-config (cfg.yaml line 4): num_redundant_experts = 4 disagrees with "
       "num-redundant-experts (cfg.yaml line 2) = 2"},
  };
  for (const auto& c : cases) {
    std::map<std::string, std::string> origins;
    ServeConfig cfg;
    apply_serve_config_yaml(cfg, c.yaml, "cfg.yaml", &origins);
    const std::string got = error_of([&] { cfg.validate(origins); });
    if (c.message) EXPECT_EQ(got, c.message) << c.yaml;
    else EXPECT_NE(got, "") << c.yaml;
  }
  ServeConfig cfg;
  apply_serve_config_yaml(cfg, cases[1].yaml, "cfg.yaml");
  const runtime::eplb::EplbConfig e = cfg.eplb();
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.window_size, 10);
  EXPECT_EQ(e.step_interval, 20);
  EXPECT_EQ(cfg.redundant_experts(), 2);
  ServeConfig plain;
  EXPECT_FALSE(plain.eplb().enabled);
  EXPECT_EQ(plain.eplb().window_size, 1000);
  EXPECT_EQ(plain.eplb().step_interval, 3000);
}

// The tier keys go together: a disk tier needs its folder, its size and a host tier above.
TEST(ServeConfig, KvTierKeysGoTogether) {
  const struct {
    const char* yaml;
    const char* message;  // "" : valid
  } cases[] = {
      {"kv-offload-bytes: 1GiB", ""},
      {"kv-offload-bytes: 1GiB\nkv-disk-dir: /tmp/kv\nkv-disk-bytes: 10GB", ""},
      {"kv-offload-bytes: 1GiB\nkv-disk-dir: /tmp/kv",
       "kv-disk-dir (cfg.yaml line 2) and kv-disk-bytes go together: a disk tier needs a folder "
       "and a size"},
      {"kv-offload-bytes: 1GiB\nkv-disk-bytes: 10GB",
       "kv-disk-dir and kv-disk-bytes (cfg.yaml line 2) go together: a disk tier needs a folder "
       "and a size"},
      {"kv-disk-dir: /tmp/kv\nkv-disk-bytes: 10GB",
       "kv-disk-bytes (cfg.yaml line 2) needs a host tier: set kv-offload-bytes (blocks reach "
       "disk from host memory)"},
  };
  for (const auto& c : cases) {
    std::map<std::string, std::string> origins;
    ServeConfig cfg;
    apply_serve_config_yaml(cfg, c.yaml, "cfg.yaml", &origins);
    EXPECT_EQ(error_of([&] { cfg.validate(origins); }), c.message) << c.yaml;
  }
}

TEST(ServeConfig, FlagSetsForTheArgParser) {
  const std::set<std::string> values = serve_value_flags(), bools = serve_bool_flags();
  EXPECT_TRUE(values.count("config"));
  EXPECT_TRUE(values.count("port"));
  EXPECT_TRUE(values.count("kv-cache-memory-bytes"));
  EXPECT_FALSE(values.count("enable-prefix-caching"));
  EXPECT_EQ(bools, (std::set<std::string>{"enable-chunked-prefill", "no-enable-chunked-prefill",
                                          "async-scheduling", "no-async-scheduling",
                                          "enable-prefix-snapshots", "no-enable-prefix-snapshots",
                                          "kv-check-invariants", "no-kv-check-invariants",
                                          "enable-expert-parallel", "no-enable-expert-parallel",
                                          "enable-eplb", "no-enable-eplb",
                                          "enable-prefix-caching", "no-enable-prefix-caching",
                                          "bounded-replay", "no-bounded-replay",
                                          "clip-prefix", "no-clip-prefix"}));
  EXPECT_EQ(values.size() + bools.size() / 2, serve_config_keys().size() + 1);
}

TEST(ServeConfig, ApplyProcessSettingsSetsKernelThreads) {
  const int before = kernels::num_threads();
  ServeConfig cfg;
  cfg.threads = 1;
  apply_process_settings(cfg);
  EXPECT_EQ(kernels::num_threads(), 1);
  kernels::set_num_threads(before);
}

}  // namespace
}  // namespace troupe::config

namespace troupe::config {
namespace {

// --speculative-config: vLLM's JSON keys reach the engine config; bad JSON, unknown keys
// and bad values name the JSON key and where the value came from.
TEST(ServeConfig, SpeculativeConfigParsesAndNamesBadKeys) {
  ServeConfig c;
  c.speculative_config = R"({"method": "dspark", "num_speculative_tokens": 3})";
  const runtime::EngineConfig e = c.to_engine_config();
  EXPECT_EQ(e.speculative.method, "dspark");
  EXPECT_EQ(e.speculative.num_speculative_tokens, 3);
  EXPECT_FALSE(ServeConfig{}.to_engine_config().speculative.enabled());
  struct Bad {
    std::string json, mentions;
  };
  for (const Bad& b : std::vector<Bad>{
           {"{\"method\": \"dspark\"", "not valid JSON"},
           {"[1]", "must be a JSON object"},
           {R"({"method": "eagle", "num_speculative_tokens": 3})", "\"method\""},
           {R"({"method": "dspark", "num_speculative_tokens": 0})", "\"num_speculative_tokens\""},
           {R"({"method": "dspark", "num_speculative_tokens": "3"})", "\"num_speculative_tokens\""},
           {R"({"method": "dspark", "num_speculative_tokens": 3, "draft": 1})", "unknown key \"draft\""},
           {R"({"num_speculative_tokens": 3})", "\"method\" is required"},
           {R"({"method": "dspark", "num_speculative_tokens": 3, "acceptance_rate": 0.5})",
            "\"acceptance_rate\""},
       }) {
    c.speculative_config = b.json;
    const std::string e = error_of([&] { c.validate({{"speculative-config", "flag --speculative-config"}}); });
    EXPECT_NE(e.find("speculative-config (flag --speculative-config)"), std::string::npos) << e;
    EXPECT_NE(e.find(b.mentions), std::string::npos) << b.json << " -> " << e;
  }
}

}  // namespace
}  // namespace troupe::config
