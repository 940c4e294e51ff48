// `troupe inspect --model DIR | --preset NAME [--dep N]`: what a model is and what it
// costs: config summary, CSA2 layer modes, parameter counts (total and activated per
// token), bytes per dtype, per-token and per-request state, and weight memory per rank
// of a DEP group. With --model, the checkpoint (if any) is validated against the config.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "kernels/check.h"
#include "model/config.h"
#include "model/footprint.h"
#include "model/safetensors.h"
#include "model/tensor_spec.h"

namespace troupe::cli {

namespace {

using model::LayerMode;
using model::ModelConfig;

// Decimal units (1 GB = 1e9 B), as the seeds and vendor sheets quote sizes.
std::string human_bytes(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else if (b >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2f KB", b / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

std::string count(int64_t n) {
  char buf[32];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof buf, "%.2fB", double(n) / 1e9);
  else if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.2fM", double(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

// [3,4,5,7] -> "3-5,7"
std::string ranges(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

void print_config(const ModelConfig& c) {
  std::printf("config\n");
  std::printf(
      "  vocab %lld, hidden %lld, %lld layers (encoder 0-%lld, decoder %lld-%lld), eps %g\n",
      (long long)c.vocab_size, (long long)c.hidden_size, (long long)c.num_hidden_layers,
      (long long)c.n_encoder_layers - 1, (long long)c.n_encoder_layers,
      (long long)c.num_hidden_layers - 1, c.rms_norm_eps);
  std::printf(
      "  attention: %lld heads x %lld (rope %lld), q_lora %lld, out %lld groups x %lld, window "
      "%lld\n",
      (long long)c.num_attention_heads, (long long)c.head_dim, (long long)c.qk_rope_head_dim,
      (long long)c.q_lora_rank, (long long)c.o_groups, (long long)c.o_lora_rank,
      (long long)c.sliding_window);
  std::printf(
      "  indexer: %lld heads x %lld, top-%lld; candidates from layer %lld, blocks of %lld, top "
      "%lld\n",
      (long long)c.index_n_heads, (long long)c.index_head_dim, (long long)c.index_topk,
      (long long)c.candidate_source_layer_id, (long long)c.candidate_block_size,
      (long long)c.candidate_topk_blocks);
  std::printf("  moe: %lld routed (top %lld) + %lld shared, width %lld; mHC %lld streams\n",
              (long long)c.n_routed_experts, (long long)c.top_k, (long long)c.n_shared,
              (long long)c.moe_intermediate_size, (long long)c.hc_mult);
  std::printf("  engram: layers %s, 2..%lld-grams, %lld heads x %lld\n",
              ranges(c.engram_layer_ids).c_str(), (long long)c.engram_max_ngram_size,
              (long long)c.engram_n_heads, (long long)c.engram_head_dim);
  std::printf(
      "  dspark: %lld stages on layers %s, block %lld, %lld experts (top %lld), %lld drafts; "
      "replay_tokens %lld\n",
      (long long)c.num_nextn_predict_layers, ranges(c.dspark_target_layer_ids).c_str(),
      (long long)c.dspark_block_size, (long long)c.dspark_n_routed_experts,
      (long long)c.dspark_top_k, (long long)c.num_speculative_tokens, (long long)c.replay_tokens);
}

void print_layers(const ModelConfig& c) {
  std::printf("layer modes\n");
  for (LayerMode m : {LayerMode::Swa, LayerMode::Full, LayerMode::Reindex, LayerMode::Reuse}) {
    std::vector<int64_t> ids;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      if (c.layer_mode[l] == m) ids.push_back(l);
    std::printf("  %-8s %s\n", model::to_string(m), ranges(ids).c_str());
  }
  std::printf("  %5s %5s %-8s %6s %8s %-7s %s\n", "layer", "ratio", "mode", "kv_src", "topk_src",
              "part", "engram");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    std::printf("  %5lld %5lld %-8s %6lld %8lld %-7s %s\n", (long long)l, (long long)c.ratio(l),
                model::to_string(c.layer_mode[l]), (long long)c.kv_source[l],
                (long long)c.topk_source[l], l < c.n_encoder_layers ? "encoder" : "decoder",
                c.is_engram_layer(l) ? "yes" : "-");
}

void print_params(const model::ParamSummary& s) {
  std::printf("parameters (weights; bytes as stored, scales included)\n");
  auto row = [](const char* what, const model::ParamGroup& g) {
    std::printf("  %-26s %10s  %12s\n", what, count(g.params).c_str(),
                human_bytes(g.bytes).c_str());
  };
  row("total", s.total);
  row("routed experts (target)", s.target_experts);
  row("engram tables", s.engram_tables);
  row("dense (replicated)", s.dense);
  row("dspark draft (all)", s.draft);
  model::ParamGroup backbone{s.total.params - s.engram_tables.params - s.draft.params,
                             s.total.bytes - s.engram_tables.bytes - s.draft.bytes};
  row("target without engram", backbone);
  std::printf(
      "  activated per token, decode:  %s  (dense + top-k experts + engram rows + embed + head)\n",
      count(s.activated_decode).c_str());
  std::printf("  activated per token, prefill: %s  (layers < Ne, layer Ne's KV producers, embed)\n",
              count(s.activated_prefill).c_str());
  std::printf("  activated per draft slot:     %s  (all stages, dspark_top_k experts each)\n",
              count(s.activated_draft).c_str());
  std::printf("bytes by dtype\n");
  for (const auto& [dtype, bytes] : s.bytes_by_dtype)
    std::printf("  %-8s %12s\n", model::to_string(dtype), human_bytes(bytes).c_str());
}

void print_state(const ModelConfig& c) {
  const auto r = model::request_state_bytes(c);
  std::printf("per-token and per-request state\n");
  std::printf("  global KV (compressed KV + index keys): %g B/token\n",
              model::global_kv_bytes_per_token(c));
  std::printf("  SWA rings per request:        %lld B (%s)\n", (long long)r.swa_bytes,
              human_bytes(r.swa_bytes).c_str());
  std::printf("  DSpark rings per request:     %lld B (%s)\n", (long long)r.dspark_bytes,
              human_bytes(r.dspark_bytes).c_str());
  std::printf("  compressor carry per request: %lld B (%s)\n", (long long)r.compressor_bytes,
              human_bytes(r.compressor_bytes).c_str());
}

void print_ranks(const ModelConfig& c, const model::ParamSummary& s,
                 const std::vector<int64_t>& sizes) {
  std::printf("weight memory per rank, DEP-N (routed experts split, dense replicated)\n");
  std::printf("  engram tables: %s once per node in host memory, or sharded (last column)\n",
              human_bytes(s.engram_tables.bytes).c_str());
  std::printf("  %5s %12s %12s %12s %12s %12s %14s\n", "N", "experts/rank", "draft exp.", "dense",
              "experts", "weights/rank", "+engram/N");
  for (int64_t n : sizes) {
    const auto m = model::rank_memory(c, s, n);
    std::printf("  %5lld %12lld %12lld %12s %12s %12s %14s\n", (long long)n,
                (long long)m.target_experts_per_rank, (long long)m.draft_experts_per_rank,
                human_bytes(m.dense_bytes).c_str(), human_bytes(m.expert_bytes).c_str(),
                human_bytes(m.weight_bytes()).c_str(),
                human_bytes(m.weight_bytes() + m.engram_sharded_bytes).c_str());
  }
}

// Validates the checkpoint next to config.json, when there is one.
void print_checkpoint(const std::string& dir, const ModelConfig& c) {
  namespace fs = std::filesystem;
  bool any = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    any |= e.path().extension() == ".safetensors";
  if (!any) {
    std::printf("checkpoint: no *.safetensors in %s (config only)\n", dir.c_str());
    return;
  }
  const auto ckpt = model::Checkpoint::open(dir);
  model::validate_checkpoint(ckpt, c);
  std::set<std::string> files;
  for (const auto& [name, t] : ckpt.tensors()) files.insert(t.file);
  std::printf(
      "checkpoint: %zu tensors in %zu file(s), every tensor of MODEL.md section 2 present and "
      "valid\n",
      ckpt.tensors().size(), files.size());
}

}  // namespace

int run_inspect(const CommandArgs& argv) {
  Args args(argv, {"model", "preset", "dep"}, {});
  if (args.has("model") == args.has("preset") || !args.positional().empty())
    TROUPE_FAIL("usage: troupe inspect --model DIR | --preset NAME [--dep N]");
  const ModelConfig c = args.has("model") ? model::load_config(*args.get("model") + "/config.json")
                                          : model::preset_config(*args.get("preset"));
  std::vector<int64_t> sizes{1, 2, 4, 8, 16, 32, 64};
  if (args.has("dep")) {
    const int64_t n = args.get_int("dep", 1);
    if (n < 1) TROUPE_FAIL("flag --dep expects a group size >= 1, got " << n);
    sizes = {n};
  }
  std::printf("model: %s\n", args.get_or("model", args.get_or("preset", "")).c_str());
  if (args.has("model")) print_checkpoint(*args.get("model"), c);
  print_config(c);
  print_layers(c);
  const auto summary = model::summarize_params(c, model::checkpoint_tensor_specs(c));
  print_params(summary);
  print_state(c);
  print_ranks(c, summary, sizes);
  return 0;
}

}  // namespace troupe::cli
