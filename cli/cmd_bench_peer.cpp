// `troupe bench peer` (bench/peer/llamacpp.sh drives it; docs/peer-bench.md):
//   --write DIR --files dense-f16,moe-q8_0,...   the seeded GGUF files (DIR/<name>.gguf)
//   --limits [--quick]                           the machine limits, one JSON line
//   --model x.gguf [--pp 512 --tg 128 --parallel 4,16 --parallel-steps 32 --repeats 2]
//   --model x.gguf --check-tokens 1,2,... --prompt-len P   teacher-forced greedy check
// all at --threads (default 2).
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "bench/peer/peer_bench.h"
#include "bench/peer/peer_files.h"
#include "cli/args.h"
#include "cli/bench_peer.h"
#include "kernels/check.h"

namespace troupe::cli {
namespace {

model::GgmlType parse_type(const std::string& name) {
  if (name == "f32") return model::GgmlType::F32;
  if (name == "f16") return model::GgmlType::F16;
  if (name == "bf16") return model::GgmlType::BF16;
  if (name == "q8_0") return model::GgmlType::Q8_0;
  if (name == "q4_0") return model::GgmlType::Q4_0;
  TROUPE_FAIL("unknown tensor type '" << name << "' (f32, f16, bf16, q8_0, q4_0)");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int write_files(const Args& a) {
  const std::string dir = *a.get("write");
  std::filesystem::create_directories(dir);
  const uint64_t seed = static_cast<uint64_t>(a.get_int("seed", 15));
  for (const std::string& name : split(a.get_or("files", "dense-f16,dense-q8_0,dense-q4_0,moe-q8_0,moe-q4_0"))) {
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos) TROUPE_FAIL("--files: '" << name << "' is not SHAPE-TYPE");
    const bench::PeerShape& shape = bench::peer_shape(name.substr(0, dash));
    const std::string path = dir + "/" + name + ".gguf";
    bench::write_peer_file(shape, parse_type(name.substr(dash + 1)), seed, path);
    std::printf("wrote %s (%.3g B parameters)\n", path.c_str(), double(bench::total_params(shape)) * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int bench_peer(const CommandArgs& argv) {
  Args a(argv,
         {"write", "files", "seed", "model", "threads", "pp", "tg", "parallel", "parallel-steps",
          "repeats", "check-tokens", "prompt-len"},
         {"limits", "quick", "profile"});
  if (!a.positional().empty()) TROUPE_FAIL("bench peer takes flags only, got '" << a.positional()[0] << "'");
  const int threads = static_cast<int>(a.get_int("threads", 2));
  if (threads < 1) TROUPE_FAIL("--threads must be at least 1, got " << threads);
  if (a.has("write")) return write_files(a);
  if (a.has("limits")) {
    bench::print_peer_limits(threads, a.has("quick"));
    return 0;
  }
  if (!a.has("model")) TROUPE_FAIL("bench peer needs --write DIR, --limits or --model x.gguf");
  if (a.has("check-tokens")) {
    const std::vector<int32_t> tokens = parse_token_ids(*a.get("check-tokens"));
    const int64_t prompt = a.get_int("prompt-len", 1);
    if (prompt < 1 || prompt >= int64_t(tokens.size()))
      TROUPE_FAIL("--prompt-len must be in [1, " << tokens.size() << "), got " << prompt);
    bench::check_peer_tokens(*a.get("model"), tokens, prompt, threads);
    return 0;
  }
  bench::PeerRunConfig c;
  c.model = *a.get("model");
  c.threads = threads;
  c.pp = a.get_int("pp", c.pp);
  c.tg = a.get_int("tg", c.tg);
  c.parallel_steps = a.get_int("parallel-steps", c.parallel_steps);
  c.repeats = static_cast<int>(a.get_int("repeats", c.repeats));
  c.profile = a.has("profile");
  for (const std::string& s : split(a.get_or("parallel", ""))) c.parallel.push_back(std::stoll(s));
  if (c.pp < 1 || c.tg < 1 || c.parallel_steps < 1 || c.repeats < 1)
    TROUPE_FAIL("--pp, --tg, --parallel-steps and --repeats must be at least 1");
  for (int64_t n : c.parallel)
    if (n < 1) TROUPE_FAIL("--parallel: sequence counts must be at least 1, got " << n);
  bench::run_peer_troupe(c);
  return 0;
}

}  // namespace troupe::cli
