#include "runtime/stop_checker.h"

#include <algorithm>

#include "model/tokenizer.h"
#include "runtime/request.h"

namespace troupe::runtime {

namespace {

// U+FFFD in UTF-8: what decode gives for bytes that are not (yet) a whole character.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

size_t Detokenizer::update(const model::TextTokenizer& tok, std::span<const int32_t> output,
                           bool skip_special) {
  const auto pending = output.subspan(static_cast<size_t>(read_offset_));
  if (pending.empty()) return 0;
  std::string text = tok.decode(pending, skip_special);
  const bool maybe_incomplete = ends_with(text, kReplacement);
  if (maybe_incomplete && static_cast<int64_t>(pending.size()) < kMaxHeldTokens) return 0;
  text_ += text;
  read_offset_ = static_cast<int64_t>(output.size());
  return text.size();
}

void Detokenizer::flush(const model::TextTokenizer& tok, std::span<const int32_t> output,
                        bool skip_special) {
  const auto pending = output.subspan(static_cast<size_t>(read_offset_));
  text_ += tok.decode(pending, skip_special);
  read_offset_ = static_cast<int64_t>(output.size());
}

std::string Detokenizer::take_stream(size_t end) {
  end = std::min(end, text_.size());
  if (end <= streamed_) return {};
  std::string out = text_.substr(streamed_, end - streamed_);
  streamed_ = end;
  return out;
}

StopMatch find_stop_string(const std::string& text, size_t new_bytes,
                           const std::vector<std::string>& stops) {
  StopMatch best;
  for (size_t i = 0; i < stops.size(); ++i) {
    const std::string& s = stops[i];
    // A match must end inside the new bytes, so it starts at most |s| - 1 bytes earlier.
    const size_t reach = new_bytes + s.size() - 1;
    const size_t from = text.size() > reach ? text.size() - reach : 0;
    const size_t pos = text.find(s, from);
    if (pos != std::string::npos && pos < best.pos) best = {pos, static_cast<int64_t>(i)};
  }
  return best;
}

size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    const size_t longest = std::min(s.size() - 1, text.size());
    for (size_t k = longest; k > hold; --k) {
      if (ends_with(text, std::string_view(s).substr(0, k))) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

namespace {

void finish(Request& r, RequestStatus status, StopReason reason, const StopLimits& limits,
            bool detokenize_last) {
  r.status = status;
  r.stop_reason = std::move(reason);
  if (limits.tokenizer == nullptr) return;
  // A stop token's own text is not part of the output (as vLLM).
  auto out = r.output();
  if (!detokenize_last) out = out.first(out.size() - 1);
  r.detok.flush(*limits.tokenizer, out, r.params.skip_special_tokens);
}

// Matches stop strings on the text the last token added; cuts the text on a match.
bool check_stop_strings(Request& r, size_t new_bytes, const StopLimits& limits) {
  const auto& stops = r.params.stop;
  if (stops.empty() || new_bytes == 0) return false;
  const StopMatch m = find_stop_string(r.detok.text(), new_bytes, stops);
  if (m.index < 0) return false;
  const std::string& s = stops[static_cast<size_t>(m.index)];
  r.status = RequestStatus::FinishedStopped;
  r.stop_reason = s;
  r.detok.truncate(m.pos + (r.params.include_stop_str_in_output ? s.size() : 0));
  return true;
}

}  // namespace

bool check_stop(Request& r, const StopLimits& limits) {
  const int32_t last = r.tokens.back();
  if (!r.params.ignore_eos && last == limits.eos_token_id) {
    finish(r, RequestStatus::FinishedStopped, {}, limits, false);
    return true;
  }
  if (contains(r.params.stop_token_ids, last)) {
    finish(r, RequestStatus::FinishedStopped, last, limits, false);
    return true;
  }
  size_t new_bytes = 0;
  if (limits.tokenizer != nullptr) {
    new_bytes = r.detok.update(*limits.tokenizer, r.output(), r.params.skip_special_tokens);
  }
  if (check_stop_strings(r, new_bytes, limits)) return true;
  if (r.num_output_tokens() >= r.params.max_tokens || r.num_tokens() >= limits.max_model_len) {
    finish(r, RequestStatus::FinishedLength, {}, limits, true);
    return true;
  }
  return false;
}

}  // namespace troupe::runtime
