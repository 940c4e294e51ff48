// troupe's side of the peer benchmark (bench/peer/peer_bench.h).
#include "bench/peer/peer_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "bench/common/limits.h"
#include "bench/common/stats.h"
#include "bench/forward/forward_bench.h"
#include "kernels/check.h"
#include "kernels/parallel.h"
#include "kernels/sampling.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "model/op_profile.h"

namespace troupe::bench {
namespace {

using model::LlamaModel;
using model::LlamaState;

constexpr int64_t kPromptTokens = 16;  // before the tg and batched-decode figures

// Bytes of the weights one decode token reads: every tensor but the embedding table (one
// row), stacked experts at top_k / E of their size.
double active_bytes_per_token(const LlamaModel& m) {
  double bytes = 0;
  const double expert_share = m.config.is_moe() ? double(m.config.experts_used) / double(m.config.experts) : 1.0;
  for (const model::GgufTensor& t : m.file->tensors()) {
    if (t.name == "token_embd.weight") {
      bytes += double(t.nbytes) / double(t.rows());
      if (m.weights.tied_output()) bytes += double(t.nbytes);
      continue;
    }
    bytes += t.name.find("_exps.") != std::string::npos ? expert_share * double(t.nbytes) : double(t.nbytes);
  }
  return bytes;
}

// Multiply-adds x 2 per token in the matrices (attention over the cache not counted).
double flops_per_token(const LlamaModel& m) {
  const model::LlamaConfig& c = m.config;
  const double attn = 2.0 * c.dim * c.heads * c.head_dim + 2.0 * c.dim * c.kv_heads * c.head_dim;
  const double mlp = 3.0 * c.dim * c.ffn_dim * (c.is_moe() ? c.experts_used : 1) + double(c.dim) * c.experts;
  return 2.0 * (c.layers * (attn + mlp) + double(c.vocab_size) * c.dim);
}

// A "Field:  123 kB" line of /proc/self/status in KiB (VmRSS, RssAnon), or -1.
int64_t self_status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

double weight_bytes(const LlamaModel& m) {
  double bytes = 0;
  for (const model::GgufTensor& t : m.file->tensors()) bytes += double(t.nbytes);
  return bytes;
}

template <class Fn>
double best_seconds(int repeats, Fn&& fn) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_seconds();
    fn();
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

double time_prefill(const LlamaModel& m, const PeerRunConfig& c) {
  const std::vector<int32_t> tokens = peer_tokens(c.pp, m.config.vocab_size);
  return best_seconds(c.repeats, [&] {
    LlamaState s = LlamaState::empty(m.config);
    m.forward->run(s, tokens, /*all_logits=*/false);
  });
}

// One more prefill with the ops timed, to stderr (as profile_generation).
void profile_prefill(const LlamaModel& m, const PeerRunConfig& c) {
  const std::vector<int32_t> tokens = peer_tokens(c.pp, m.config.vocab_size);
  LlamaState s = LlamaState::empty(m.config);
  model::OpProfile ops;
  double seconds = 0;
  {
    const model::ScopedOpProfile bound(ops);
    const double t0 = now_seconds();
    m.forward->run(s, tokens, /*all_logits=*/false);
    seconds = now_seconds() - t0;
  }
  print_op_table(stderr, ops, 1, seconds, "prefill of " + std::to_string(c.pp) + " tokens");
}

// Seconds of tg steps of one sequence after the prompt (not timed); each step feeds the
// previous argmax. ops: where the steps' time per op goes (model/op_profile.h), or null.
double generation_seconds(const LlamaModel& m, int64_t tg, model::OpProfile* ops) {
  const std::vector<int32_t> prompt = peer_tokens(kPromptTokens, m.config.vocab_size);
  LlamaState s = LlamaState::empty(m.config);
  std::vector<float> logits = m.forward->run(s, prompt, false);
  std::optional<model::ScopedOpProfile> bound;
  if (ops != nullptr) bound.emplace(*ops);
  const double t0 = now_seconds();
  for (int64_t i = 0; i < tg; ++i) {
    const int32_t next = kernels::argmax(logits.data(), m.config.vocab_size);
    logits = m.forward->run(s, std::span(&next, 1), false);
  }
  return now_seconds() - t0;
}

double time_generation(const LlamaModel& m, const PeerRunConfig& c) {
  double best = 1e30;
  for (int r = 0; r < c.repeats; ++r) best = std::min(best, generation_seconds(m, c.tg, nullptr));
  return best;
}

// One more tg pass with the ops timed, printed to stderr so the JSON line stays the only
// stdout.
void profile_generation(const LlamaModel& m, const PeerRunConfig& c) {
  model::OpProfile ops;
  const double seconds = generation_seconds(m, c.tg, &ops);
  print_op_table(stderr, ops, c.tg, seconds);
}

// `seqs` sequences decoded together (one batched step per token of each).
double time_batched(const LlamaModel& m, const PeerRunConfig& c, int64_t seqs) {
  const int64_t V = m.config.vocab_size;
  double best = 1e30;
  for (int r = 0; r < c.repeats; ++r) {
    std::vector<LlamaState> states(static_cast<size_t>(seqs), LlamaState::empty(m.config));
    std::vector<LlamaState*> ptrs;
    std::vector<int32_t> next(static_cast<size_t>(seqs));
    const std::vector<int32_t> base = peer_tokens(kPromptTokens + seqs, V);
    for (int64_t i = 0; i < seqs; ++i) {
      ptrs.push_back(&states[i]);
      const std::vector<int32_t> prompt(base.begin() + i, base.begin() + i + kPromptTokens);
      const std::vector<float> logits = m.forward->run(states[i], prompt, false);
      next[i] = kernels::argmax(logits.data(), V);
    }
    const double t0 = now_seconds();
    for (int64_t step = 0; step < c.parallel_steps; ++step) {
      const std::vector<float> logits = m.forward->decode(ptrs, next);
      for (int64_t i = 0; i < seqs; ++i) next[i] = kernels::argmax(logits.data() + i * V, V);
    }
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

}  // namespace

std::vector<int32_t> peer_tokens(int64_t count, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) t[i] = int32_t(3 + (i * 7919) % (vocab - 3));
  return t;
}

void run_peer_troupe(const PeerRunConfig& c) {
  kernels::set_num_threads(c.threads);
  if (!model::is_gguf_path(c.model)) TROUPE_FAIL("bench peer: --model must be a .gguf file (llama.cpp reads it too)");
  const std::unique_ptr<LlamaModel> m = LlamaModel::load(c.model);
  // Resident memory right after the load: the file's bytes, the row groups' copy (none
  // where every matrix was regrouped in place: model/llama_weights.cpp), nothing run yet.
  const int64_t rss_kib = self_status_kib("VmRSS"), anon_kib = self_status_kib("RssAnon");
  const double pp_s = time_prefill(*m, c), tg_s = time_generation(*m, c);
  if (c.profile) profile_prefill(*m, c), profile_generation(*m, c);
  std::printf("{\"engine\":\"troupe\",\"model\":\"%s\",\"threads\":%d,\"pp\":%lld,\"tg\":%lld,"
              "\"pp_tok_s\":%.3f,\"tg_tok_s\":%.3f,\"parallel\":[",
              c.model.c_str(), c.threads, (long long)c.pp, (long long)c.tg, double(c.pp) / pp_s,
              double(c.tg) / tg_s);
  for (size_t i = 0; i < c.parallel.size(); ++i) {
    const double s = time_batched(*m, c, c.parallel[i]);
    std::printf("%s{\"seqs\":%lld,\"tok_s\":%.3f}", i ? "," : "", (long long)c.parallel[i],
                double(c.parallel[i] * c.parallel_steps) / s);
  }
  std::printf("],\"weight_bytes\":%.0f,\"active_bytes_per_token\":%.0f,\"flops_per_token\":%.0f,"
              "\"row_groups_copy_bytes\":%lld,\"load_rss_kib\":%lld,\"load_rss_anon_kib\":%lld}\n",
              weight_bytes(*m), active_bytes_per_token(*m), flops_per_token(*m),
              (long long)m->weights.row_groups_bytes, (long long)rss_kib, (long long)anon_kib);
  std::fflush(stdout);
}

void check_peer_tokens(const std::string& path, const std::vector<int32_t>& tokens,
                       int64_t prompt_len, int threads) {
  kernels::set_num_threads(threads);
  const std::unique_ptr<LlamaModel> m = LlamaModel::load(path);
  const int64_t V = m->config.vocab_size, T = static_cast<int64_t>(tokens.size());
  LlamaState s = LlamaState::empty(m->config);
  const std::vector<float> logits = m->forward->run(s, tokens, /*all_logits=*/true);
  int64_t same = 0, checked = 0;
  std::string differ;
  for (int64_t p = prompt_len - 1; p + 1 < T; ++p, ++checked) {
    const float* row = logits.data() + p * V;
    const int32_t ours = kernels::argmax(row, V), theirs = tokens[p + 1];
    if (ours == theirs) {
      ++same;
      continue;
    }
    float scale = 0;
    for (int64_t v = 0; v < V; ++v) scale = std::max(scale, std::fabs(row[v]));
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s{\"position\":%lld,\"troupe\":%d,\"llamacpp\":%d,\"gap\":%.4g}",
                  differ.empty() ? "" : ",", (long long)p, ours, theirs,
                  double(row[ours] - row[theirs]) / double(scale));
    differ += buf;
  }
  std::printf("{\"check\":\"teacher-forced greedy\",\"model\":\"%s\",\"positions\":%lld,\"same\":%lld,"
              "\"differ\":[%s]}\n",
              path.c_str(), (long long)checked, (long long)same, differ.c_str());
  std::fflush(stdout);
}

void print_peer_limits(int threads, bool quick) {
  kernels::set_num_threads(threads);
  const MachineLimits l = measure_limits(quick);
  std::printf("{\"limits\":true,\"threads\":%d,\"dram_gbs\":%.2f,\"fp32_gflops\":%.1f,\"fp32_what\":\"%s\","
              "\"int8_gops\":%.1f,\"int8_what\":\"%s\"}\n",
              threads, l.dram_gbs_all, l.fp32.gflops_all, l.fp32.what, l.int8.gflops_all, l.int8.what);
  std::fflush(stdout);
}

}  // namespace troupe::bench
