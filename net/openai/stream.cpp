#include "net/openai/stream.h"

#include "kernels/check.h"

namespace troupe::net::openai {

std::string sse_data(const json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

std::string_view sse_done() {
  return "data: [DONE]\n\n";
}

StreamEncoder::StreamEncoder(const GenerationRequest& req, ResponseMeta meta,
                             const model::TextTokenizer* tok)
    : endpoint_(req.endpoint),
      meta_(std::move(meta)),
      prompt_tokens_(int64_t(req.prompt_tokens.size())),
      include_usage_(req.include_usage),
      with_logprobs_(req.logprobs.has_value()),
      tok_(tok),
      choices_(size_t(req.n)),
      text_offsets_(size_t(req.n), 0),
      token_ids_(req) {
  for (int32_t i = 0; i < req.n; ++i) choices_[size_t(i)].index = i;
}

json StreamEncoder::envelope() const {
  return {
      {"id", meta_.id},
      {"object", endpoint_ == Endpoint::Completions ? "text_completion" : "chat.completion.chunk"},
      {"created", meta_.created},
      {"model", meta_.model}};
}

json StreamEncoder::chunk(json choice) const {
  json c = envelope();
  c["choices"] = json::array({std::move(choice)});
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

std::string StreamEncoder::start() {
  if (endpoint_ == Endpoint::Completions) return {};
  std::string events;
  for (const ChoiceResult& c : choices_) {
    json event = chunk({{"index", c.index},
                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                        {"logprobs", nullptr},
                        {"finish_reason", nullptr}});
    token_ids_.add_to_chunk(event, c);
    events += sse_data(event);
  }
  return events;
}

std::string StreamEncoder::on_output(int32_t index, const runtime::RequestOutput& out) {
  TROUPE_CHECK(index >= 0 && size_t(index) < choices_.size(), "choice index ", index,
               " out of range [0, ", choices_.size(), ")");
  ChoiceResult& c = choices_[size_t(index)];
  c.append(out, tok_);
  c.text.clear();  // streamed, not kept
  if (out.new_text.empty() && !out.finished()) return {};
  json choice = {{"index", index}};
  if (endpoint_ == Endpoint::Completions)
    choice["text"] = out.new_text;
  else
    choice["delta"] = out.new_text.empty() ? json::object() : json{{"content", out.new_text}};
  choice["logprobs"] = take_logprobs(c, text_offsets_[size_t(index)]);
  choice["finish_reason"] = finish_reason_json(c.finish_reason);
  choice["stop_reason"] = stop_reason_json(c.stop_reason);
  json event = chunk(std::move(choice));
  token_ids_.add_to_chunk(event, c);
  return sse_data(event);
}

// The choice's logprobs not sent yet, in the endpoint's shape (null without logprobs).
json StreamEncoder::take_logprobs(ChoiceResult& c, size_t& text_offset) const {
  if (!with_logprobs_) return nullptr;
  json lp = logprobs_json(endpoint_, c.logprobs, text_offset);
  text_offset += logprobs_text_length(c.logprobs);
  c.logprobs.clear();
  return lp;
}

std::string StreamEncoder::finish() const {
  std::string events;
  if (include_usage_) {
    json c = envelope();
    c["choices"] = json::array();
    c["usage"] = usage().to_json();
    events += sse_data(c);
  }
  return events + std::string(sse_done());
}

std::string StreamEncoder::error(const ApiError& err) const {
  return sse_data(err.body()) + std::string(sse_done());
}

bool StreamEncoder::done() const {
  for (const ChoiceResult& c : choices_)
    if (!c.finished()) return false;
  return true;
}

}  // namespace troupe::net::openai
