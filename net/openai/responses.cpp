#include "net/openai/responses.h"

#include <algorithm>
#include <cstdio>

#include "kernels/check.h"
#include "model/tokenizer.h"

namespace troupe::net::openai {

namespace {

json token_bytes(const std::string& token) {
  json bytes = json::array();
  for (unsigned char c : token) bytes.push_back(int(c));
  return bytes;
}

// Characters (code points) of UTF-8 text, as OpenAI's text_offset counts.
size_t code_points(const std::string& text) {
  auto starts_char = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  return size_t(std::count_if(text.begin(), text.end(), starts_char));
}

json completion_logprobs(const std::vector<TokenLogprob>& logprobs, size_t offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : logprobs) {
    tokens.push_back(t.token);
    token_logprobs.push_back(t.logprob);
    json alternatives = json::object();
    for (const auto& [token, lp] : t.top) alternatives[token] = lp;
    alternatives.emplace(t.token, t.logprob);  // the sampled token, if not among the top
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += code_points(t.token);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json chat_logprobs(const std::vector<TokenLogprob>& logprobs) {
  json content = json::array();
  for (const TokenLogprob& t : logprobs) {
    json top = json::array();
    for (const auto& [token, lp] : t.top)
      top.push_back({{"token", token}, {"logprob", lp}, {"bytes", token_bytes(token)}});
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", token_bytes(t.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json choice_json(Endpoint endpoint, const ChoiceResult& c, bool with_logprobs) {
  json choice = {{"index", c.index}};
  if (endpoint == Endpoint::Completions)
    choice["text"] = c.text;
  else
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  choice["logprobs"] = with_logprobs ? logprobs_json(endpoint, c.logprobs) : json(nullptr);
  choice["finish_reason"] = finish_reason_json(c.finish_reason);
  choice["stop_reason"] = stop_reason_json(c.stop_reason);
  return choice;
}

}  // namespace

std::string make_response_id(Endpoint endpoint, uint64_t number) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(number));
  return (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + std::string(hex);
}

TokenLogprob token_logprob(const runtime::SampleLogprobs& lp, const model::TextTokenizer& tok) {
  auto text = [&](int32_t id) { return tok.decode(std::span<const int32_t>(&id, 1)); };
  auto clamp = [](float logprob) { return std::max(logprob, -9999.0f); };  // NaN stays NaN
  TokenLogprob t{text(lp.sampled.token), clamp(lp.sampled.logprob), {}};
  t.top.reserve(lp.top.size());
  for (const runtime::Logprob& alt : lp.top)
    t.top.emplace_back(text(alt.token), clamp(alt.logprob));
  return t;
}

void ChoiceResult::append(const runtime::RequestOutput& out, const model::TextTokenizer* tok) {
  text += out.new_text;
  token_ids.insert(token_ids.end(), out.new_tokens.begin(), out.new_tokens.end());
  if (tok != nullptr)
    for (const runtime::SampleLogprobs& lp : out.new_logprobs)
      logprobs.push_back(token_logprob(lp, *tok));
  num_cached_tokens = out.num_cached_tokens;
  num_restored_tokens = std::max(num_restored_tokens, out.num_restored_tokens);
  if (out.finished()) {
    finish_reason = std::string(out.finish_reason());
    stop_reason = out.stop_reason;
  }
}

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

Usage usage_of(int64_t prompt_tokens, const std::vector<ChoiceResult>& choices) {
  Usage u;
  u.prompt_tokens = prompt_tokens;
  for (const ChoiceResult& c : choices) u.completion_tokens += int64_t(c.token_ids.size());
  if (!choices.empty()) u.cached_tokens = choices.front().num_cached_tokens;
  if (!choices.empty()) u.prompt_tokens += choices.front().num_restored_tokens;
  return u;
}

json stop_reason_json(const runtime::StopReason& r) {
  if (const int32_t* id = std::get_if<int32_t>(&r)) return *id;
  if (const std::string* s = std::get_if<std::string>(&r)) return *s;
  return nullptr;
}

json finish_reason_json(const std::string& finish_reason) {
  return finish_reason.empty() ? json(nullptr) : json(finish_reason);
}

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs,
                   size_t text_offset) {
  return endpoint == Endpoint::Completions ? completion_logprobs(logprobs, text_offset)
                                           : chat_logprobs(logprobs);
}

size_t logprobs_text_length(const std::vector<TokenLogprob>& logprobs) {
  size_t n = 0;
  for (const TokenLogprob& t : logprobs) n += code_points(t.token);
  return n;
}

json generation_response(Endpoint endpoint, const ResponseMeta& meta,
                         const std::vector<ChoiceResult>& choices, const Usage& usage,
                         bool with_logprobs) {
  json out_choices = json::array();
  for (const ChoiceResult& c : choices)
    out_choices.push_back(choice_json(endpoint, c, with_logprobs));
  return {{"id", meta.id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(out_choices)},
          {"usage", usage.to_json()}};
}

ResponseCollector::ResponseCollector(const GenerationRequest& req, ResponseMeta meta,
                                     const model::TextTokenizer* tok)
    : endpoint_(req.endpoint),
      meta_(std::move(meta)),
      prompt_tokens_(int64_t(req.prompt_tokens.size())),
      with_logprobs_(req.logprobs.has_value()),
      tok_(tok),
      choices_(size_t(req.n)),
      token_ids_(req) {
  for (int32_t i = 0; i < req.n; ++i) choices_[size_t(i)].index = i;
}

void ResponseCollector::on_output(int32_t index, const runtime::RequestOutput& out) {
  TROUPE_CHECK(index >= 0 && size_t(index) < choices_.size(), "choice index ", index,
               " out of range [0, ", choices_.size(), ")");
  choices_[size_t(index)].append(out, tok_);
}

bool ResponseCollector::done() const {
  for (const ChoiceResult& c : choices_)
    if (!c.finished()) return false;
  return true;
}

json ResponseCollector::response() const {
  json body = generation_response(endpoint_, meta_, choices_, usage_of(prompt_tokens_, choices_),
                                  with_logprobs_);
  token_ids_.add_to_response(body, choices_);
  return body;
}

json models_response(const ServingInfo& info, int64_t created) {
  json model = {{"id", info.model_name},
                {"object", "model"},
                {"created", created},
                {"owned_by", "troupe"},
                {"root", info.model_name},
                {"parent", nullptr},
                {"max_model_len", info.max_model_len}};
  return {{"object", "list"}, {"data", json::array({std::move(model)})}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace troupe::net::openai
