// `troupe draft`: one prefill of the given token ids with DSpark target features on,
// then greedy drafting after the prompt (MODEL.md §8): the anchor is the last prompt
// position, the bonus the target's argmax there, and the draft network proposes
// d_1..d_k with confidences conf_0..conf_k. Prints
//   {"anchor": a, "bonus": b, "drafts": [...], "confidence": [...]}
// so other programs can check the draft network numerically (docs/dspark.md).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "kernels/check.h"
#include "kernels/sampling.h"
#include "model/dspark_draft.h"

namespace troupe::cli {

int run_draft(const CommandArgs& argv) {
  Args a(argv, {"model", "tokens", "num-speculative"}, {});
  const auto tokens_arg = a.get("tokens");
  if (!tokens_arg) TROUPE_FAIL("--tokens 1,2,3 is required");
  const std::vector<int32_t> tokens = parse_token_ids(*tokens_arg);
  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/false);
  const model::ModelConfig& c = m->config;
  const int64_t k = a.get_int("num-speculative", c.num_speculative_tokens);
  if (k < 0 || k > c.dspark_block_size - 1)
    TROUPE_FAIL("--num-speculative must be in [0, " << c.dspark_block_size - 1
                                                    << "] (dspark_block_size - 1), got " << k);
  const int64_t E = static_cast<int64_t>(tokens.size());
  if (E >= c.max_position_embeddings)  // the bonus goes to position E
    TROUPE_FAIL("--tokens: " << E << " tokens leave no position for the bonus token (max "
                             << c.max_position_embeddings << ")");

  const model::DsparkWeights dw = model::bind_dspark_weights(m->checkpoint, c);
  const model::Forward forward(c, m->weights, &dw);
  const model::DsparkDraft draft(c, m->weights, dw);
  model::SequenceState state = model::SequenceState::empty(c);
  state.enable_features(c);
  model::SequenceInput in{&state, tokens, false};
  const std::vector<float> logits = forward.run({&in, 1})[0];
  const int64_t anchor = E - 1;
  const int32_t bonus = kernels::argmax(logits.data(), c.vocab_size);
  const model::DraftProposal p =
      draft.propose(*state.feature_ring, anchor, tokens[anchor], bonus, k);

  std::string out = "{\"anchor\":" + std::to_string(anchor) + ",\"bonus\":" +
                    std::to_string(bonus) + ",\"drafts\":[";
  for (size_t i = 0; i < p.tokens.size(); ++i) out += (i ? "," : "") + std::to_string(p.tokens[i]);
  out += "],\"confidence\":[";
  char buf[32];
  for (size_t i = 0; i < p.confidence.size(); ++i) {
    std::snprintf(buf, sizeof buf, i ? ",%.9g" : "%.9g", p.confidence[i]);
    out += buf;
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace troupe::cli
