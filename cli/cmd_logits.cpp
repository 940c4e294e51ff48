// `troupe logits`: one prefill of the given token ids from position 0; prints
// {"tokens": [...], "logits": [[...], ...]} (float32 values) for the last position,
// or every position with --all-positions. Full compute by default; --replay runs the
// decoder on the last replay_tokens positions only (bounded replay, MODEL.md §6) and
// adds "positions". Other programs check the model numerically with it. A .gguf
// --model (LLaMA family, model/llama_forward.h) runs full compute.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "kernels/check.h"
#include "model/llama_model.h"

namespace troupe::cli {
namespace {

// {"tokens":[...],("positions":[...],)"logits":[[...], ...]} for rows x vocab logits.
void print_logits_json(const std::vector<int32_t>& tokens, const std::string& positions,
                       const float* logits, int64_t rows, int64_t V) {
  std::string out = "{\"tokens\":[";
  for (size_t i = 0; i < tokens.size(); ++i) out += (i ? "," : "") + std::to_string(tokens[i]);
  if (!positions.empty()) out += "],\"positions\":[" + positions;
  out += "],\"logits\":[";
  char buf[32];
  for (int64_t r = 0; r < rows; ++r) {
    out += r ? ",[" : "[";
    for (int64_t v = 0; v < V; ++v) {
      std::snprintf(buf, sizeof buf, v ? ",%.9g" : "%.9g", logits[r * V + v]);
      out += buf;
    }
    out += "]";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// A LLaMA-family model (.gguf file or HF folder): full compute only.
int logits_gguf(const std::string& path, const std::vector<int32_t>& tokens, bool all_positions,
                bool replay) {
  if (replay) TROUPE_FAIL("--replay is for V4.1 models; a LLaMA-family model computes every position");
  const auto m = model::LlamaModel::load(path);
  model::LlamaState state = model::LlamaState::empty(m->config);
  const auto logits = m->forward->run(state, tokens, all_positions);
  const int64_t V = m->config.vocab_size;
  print_logits_json(tokens, "", logits.data(), static_cast<int64_t>(logits.size()) / V, V);
  return 0;
}

}  // namespace

int run_logits(const CommandArgs& argv) {
  Args a(argv, {"model", "tokens", "expert-precision"}, {"all-positions", "replay"});
  const auto tokens_arg = a.get("tokens");
  if (!tokens_arg) TROUPE_FAIL("--tokens 1,2,3 is required");
  const std::vector<int32_t> tokens = parse_token_ids(*tokens_arg);
  const model::ForwardOptions options = forward_options(a);
  if (model::is_llama_family_path(a.get_or("model", "")))
    return logits_gguf(*a.get("model"), tokens, a.has("all-positions"), a.has("replay"));
  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false, options);
  model::SequenceState state = model::SequenceState::empty(m->config);
  const bool replay = a.has("replay");
  if (replay && a.has("all-positions"))
    TROUPE_FAIL("--replay gives the last position's logits only; drop --all-positions");
  const int64_t E = static_cast<int64_t>(tokens.size()), R = m->config.replay_tokens;
  model::SequenceInput in{&state, tokens, a.has("all-positions")};
  if (replay && R > 0) in.decoder_tail_start = std::max<int64_t>(0, E - R);  // R = 0: full compute
  const auto logits = m->forward->run({&in, 1});
  const int64_t V = m->config.vocab_size, rows = static_cast<int64_t>(logits[0].size()) / V;
  print_logits_json(tokens, replay ? std::to_string(E - 1) : "", logits[0].data(), rows, V);
  return 0;
}

}  // namespace troupe::cli
