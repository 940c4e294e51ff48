// `troupe generate`: prompt -> streamed text on stdout, on --model DIR or the
// built-in tiny model. Prefill once, then one decode step per token. A LLaMA-family
// --model (.gguf file or HF folder) takes --prompt (its vocabulary) or --tokens (then
// prints the generated token ids).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/loaded_model.h"
#include "kernels/check.h"
#include "kernels/sampling.h"
#include "model/llama_model.h"
#include "model/speculative.h"
#include "runtime/engine.h"
#include "runtime/speculative/dspark_drafter.h"
#include "runtime/speculative/speculative_config.h"

namespace troupe::cli {
namespace {

// Prints the decoded text as it grows, holding back an incomplete UTF-8 character
// (the decoder shows it as U+FFFD until its last byte arrives).
class TextStream {
 public:
  using Decode = std::function<std::string(const std::vector<int32_t>&)>;
  explicit TextStream(const model::TextTokenizer& t)
      : decode_([&t](const std::vector<int32_t>& ids) { return t.decode(ids, /*skip_special=*/true); }) {}
  explicit TextStream(Decode decode) : decode_(std::move(decode)) {}
  void push(int32_t id) {
    ids_.push_back(id);
    const std::string text = decode_(ids_);
    if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return;
    if (text.size() > printed_) {
      std::fwrite(text.data() + printed_, 1, text.size() - printed_, stdout);
      std::fflush(stdout);
      printed_ = text.size();
    }
  }

 private:
  Decode decode_;
  std::vector<int32_t> ids_;
  size_t printed_ = 0;
};

kernels::SamplingParams sampling_from(const Args& a) {
  kernels::SamplingParams s;
  s.temperature = static_cast<float>(a.get_double("temperature", 0.0));
  s.top_k = static_cast<int32_t>(a.get_int("top-k", 0));
  s.top_p = static_cast<float>(a.get_double("top-p", 1.0));
  s.min_p = static_cast<float>(a.get_double("min-p", 0.0));
  s.seed = static_cast<uint64_t>(a.get_int("seed", 0));
  return s;
}

// --speculative: greedy DSpark draft + verify (MODEL.md §8) on a contiguous state. The
// text equals plain greedy decoding; the acceptance goes to stderr.
void generate_speculative(const LoadedModel& m, const std::vector<int32_t>& prompt, int64_t n,
                          bool ignore_eos) {
  const model::DsparkWeights dw = model::bind_dspark_weights(m.checkpoint, m.config);
  const model::Forward forward(m.config, m.weights, &dw, m.forward->options());
  const model::DsparkDraft draft(m.config, m.weights, dw, m.forward->options().expert_precision);
  model::SequenceState state = model::SequenceState::empty(m.config);
  const model::SpeculativeResult r = model::speculative_greedy(forward, draft, state, prompt, n);
  TextStream out(*m.tokenizer);
  for (int32_t t : r.tokens) {
    if (t == m.config.eos_token_id && !ignore_eos) break;
    out.push(t);
  }
  std::printf("\n");
  std::fflush(stdout);  // the text before the stats line on a shared terminal or pipe
  std::fprintf(stderr,
               "speculative: %lld verify steps, %lld drafted, %lld accepted (%.1f%%), %.3f "
               "tokens/step\n",
               static_cast<long long>(r.stats.steps), static_cast<long long>(r.stats.drafted),
               static_cast<long long>(r.stats.accepted),
               r.stats.drafted ? 100.0 * r.stats.accepted / r.stats.drafted : 0.0,
               r.stats.tokens_per_step());
}

// One token from one row of logits (the step number is the sampler's counter).
int32_t sample_token(const float* logits, int64_t vocab, const kernels::SamplingParams& sampling,
                     int64_t step) {
  int32_t token = 0;
  const uint64_t stream = 0, counter = static_cast<uint64_t>(step);
  kernels::SampleParams sp;
  sp.logits = logits;
  sp.out = &token;
  sp.m = 1;
  sp.vocab = vocab;
  sp.sampling = &sampling;
  sp.streams = &stream;
  sp.counters = &counter;
  kernels::sample(sp);
  return token;
}

// A LLaMA-family model (.gguf file or HF folder) through the Engine (paged KV, the serving path): --prompt
// TEXT through the file's vocabulary streams text; --tokens 1,2,3
// prints the generated ids, comma-separated.
int generate_gguf(const std::string& path, const Args& a, int64_t max_tokens,
                  const kernels::SamplingParams& sampling) {
  if (a.has("speculative") || a.has("speculative-config"))
    TROUPE_FAIL("speculative decoding needs a DeepSeek-V4.1 model with a DSpark draft");
  if (a.has("prompt") == a.has("tokens"))
    TROUPE_FAIL("give one of --prompt TEXT or --tokens 1,2,3 with a LLaMA-family model");
  const auto m = model::LlamaModel::load(path, /*need_tokenizer=*/a.has("prompt"));
  const std::vector<int32_t> prompt =
      a.has("prompt") ? m->tokenizer->encode(*a.get("prompt"), /*add_bos=*/true)
                      : parse_token_ids(*a.get("tokens"));
  if (prompt.empty()) TROUPE_FAIL("--prompt: the text encodes to no tokens");
  for (int32_t t : prompt)
    if (t < 0 || t >= m->config.vocab_size)
      TROUPE_FAIL("token id " << t << " is outside the vocabulary [0, " << m->config.vocab_size << ")");
  const int64_t room = m->config.context_length - static_cast<int64_t>(prompt.size());
  if (room < 1) TROUPE_FAIL("prompt of " << prompt.size() << " tokens does not fit the context");
  runtime::EngineConfig config;
  config.scheduler.max_model_len = m->config.context_length;
  // The whole prompt in one step, as one forward call: the logits (and so the text) of a
  // plain LlamaForward run.
  config.scheduler.max_num_batched_tokens =
      std::max(config.scheduler.max_num_batched_tokens, m->config.context_length);
  runtime::Engine engine(*m->forward, nullptr, config);
  runtime::RequestParams params;
  params.max_tokens = std::min(max_tokens, room);
  params.ignore_eos = a.has("ignore-eos");
  params.sampling = sampling;
  engine.add_request(0, prompt, params);
  std::string ids;
  TextStream text(*m->tokenizer);
  while (engine.has_unfinished()) {
    for (const runtime::RequestOutput& o : engine.step()) {
      if (o.status == runtime::RequestStatus::FinishedError) TROUPE_FAIL("generate: " << o.error);
      for (int32_t token : o.new_tokens) {
        if (token == m->config.eos_token_id && !params.ignore_eos) break;  // not printed
        if (a.has("prompt")) text.push(token);
        else ids += (ids.empty() ? "" : ",") + std::to_string(token);
      }
    }
  }
  std::printf("%s\n", ids.c_str());
  return 0;
}

// --speculative-config JSON: one request through the Engine with DSpark drafting and
// verification (the serving path, paged rollback; sampling stays exact); stats to stderr.
void generate_engine_speculative(LoadedModel& m, const std::vector<int32_t>& prompt,
                                 int64_t n, bool ignore_eos,
                                 const runtime::SpeculativeConfig& spec,
                                 const kernels::SamplingParams& sampling) {
  if (spec.method != "dspark")
    TROUPE_FAIL("speculative-config: method \"" << spec.method
                << "\" is a bench/test mode (troupe bench forward --speculative); generate "
                   "takes \"dspark\"");
  const std::unique_ptr<DraftModel> d = load_draft(m);
  runtime::EngineConfig config;
  config.speculative = spec;
  config.scheduler.max_model_len = m.config.max_position_embeddings;
  runtime::Engine engine(*d->forward, m.tokenizer.get(), config, d->drafter.get());
  runtime::RequestParams params;
  params.max_tokens = n;
  params.ignore_eos = ignore_eos;
  params.sampling = sampling;
  engine.add_request(0, prompt, params);
  while (engine.has_unfinished()) {
    for (const runtime::RequestOutput& o : engine.step()) {
      std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
      std::fflush(stdout);
      if (o.finished() && o.status == runtime::RequestStatus::FinishedError)
        TROUPE_FAIL("generate: " << o.error);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  const runtime::EngineFigures f = engine.figures();
  std::fprintf(stderr,
               "speculative (engine): %lld drafts, %lld draft tokens, %lld accepted (%.1f%%), "
               "mean accepted length %.3f\n",
               static_cast<long long>(f.spec_num_drafts),
               static_cast<long long>(f.spec_num_draft_tokens),
               static_cast<long long>(f.spec_num_accepted_tokens),
               f.spec_num_draft_tokens ? 100.0 * double(f.spec_num_accepted_tokens) /
                                             double(f.spec_num_draft_tokens)
                                       : 0.0,
               f.spec_num_drafts ? 1.0 + double(f.spec_num_accepted_tokens) / double(f.spec_num_drafts)
                                 : 0.0);
}

}  // namespace

int run_generate(const CommandArgs& argv) {
  Args a(argv,
         {"model", "expert-precision", "prompt", "tokens", "max-tokens", "temperature", "top-k", "top-p", "min-p",
          "seed", "speculative-config"},
         {"ignore-eos", "speculative"});
  const int64_t max_tokens = a.get_int("max-tokens", 32);
  if (max_tokens < 1 || max_tokens > 1'000'000) TROUPE_FAIL("--max-tokens must be in [1, 1000000]");
  const kernels::SamplingParams sampling = sampling_from(a);
  const model::ForwardOptions options = forward_options(a);
  if (model::is_llama_family_path(a.get_or("model", "")))
    return generate_gguf(*a.get("model"), a, max_tokens, sampling);
  if (a.has("tokens")) TROUPE_FAIL("--tokens is for LLaMA-family models (.gguf, HF folders); give --prompt TEXT");
  const auto prompt = a.get("prompt");
  if (!prompt) TROUPE_FAIL("--prompt TEXT is required");
  const runtime::SpeculativeConfig spec =  // checked before the model loads
      runtime::parse_speculative_config(a.get_or("speculative-config", ""));

  auto m = load_model(a.get_or("model", ""), /*need_tokenizer=*/true, options);
  std::vector<int32_t> next = m->tokenizer->encode(*prompt, /*add_bos=*/true);
  const int64_t room = m->config.max_position_embeddings - static_cast<int64_t>(next.size());
  if (room < 1) TROUPE_FAIL("prompt of " << next.size() << " tokens does not fit the context");

  if (a.has("speculative-config")) {
    generate_engine_speculative(*m, next, std::min(max_tokens, room), a.has("ignore-eos"), spec,
                                sampling);
    return 0;
  }
  if (a.has("speculative")) {
    if (sampling.temperature != 0.0f)
      TROUPE_FAIL("--speculative supports greedy only (temperature 0)");
    generate_speculative(*m, next, std::min(max_tokens, room), a.has("ignore-eos"));
    return 0;
  }
  model::SequenceState state = model::SequenceState::empty(m->config);
  TextStream out(*m->tokenizer);
  for (int64_t step = 0; step < std::min(max_tokens, room); ++step) {
    model::SequenceInput in{&state, next, false};
    const auto logits = m->forward->run({&in, 1});
    const int32_t token = sample_token(logits[0].data(), m->config.vocab_size, sampling, step);
    if (token == m->config.eos_token_id && !a.has("ignore-eos")) break;
    out.push(token);
    next = {token};
  }
  std::printf("\n");
  return 0;
}

}  // namespace troupe::cli
