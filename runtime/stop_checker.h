// Stop conditions of a request and the incremental detokenizer that stop strings are
// matched on.
//
// Incremental detokenization: only output tokens past `read_offset` are decoded each
// step, so a step costs O(new tokens), not O(output). Text whose last character could
// still be completed by the next token (the decode ends in U+FFFD, e.g. the first two
// bytes of an emoji) is held back until it completes; byte-level BPE decodes to the
// concatenation of the tokens' bytes, so decoding the held-back tail alone gives the
// same text as decoding the whole output.
//
// Stop strings (as vLLM): matched on the text, also across token boundaries. On a match
// the text is cut before the stop string (or after it with include_stop_str_in_output)
// and the request finishes with stop_reason = the string. While a request runs, the tail
// of the text that could still be the start of a stop string is not streamed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace troupe::model {
class TextTokenizer;
}

namespace troupe::runtime {

struct Request;

// What stopped a request, like vLLM's stop_reason: nothing (EOS, length, abort), the stop
// token id that matched, or the stop string that matched.
using StopReason = std::variant<std::monostate, int32_t, std::string>;

class Detokenizer {
 public:
  // A held-back tail longer than this many tokens is emitted anyway (as U+FFFD): it is
  // ill-formed, not an incomplete character, and holding it would make steps O(output).
  static constexpr int64_t kMaxHeldTokens = 8;

  // Appends the text of output[read_offset, end) that is complete; returns its length
  // in bytes.
  size_t update(const model::TextTokenizer& tok, std::span<const int32_t> output, bool skip_special);
  // Appends whatever is still held back (at finish).
  void flush(const model::TextTokenizer& tok, std::span<const int32_t> output, bool skip_special);
  // Cuts the text to `size` bytes (a stop string matched).
  void truncate(size_t size) { text_.resize(size); }

  const std::string& text() const { return text_; }
  // Text that was not yet returned by take_stream(), up to `end` bytes of text().
  std::string take_stream(size_t end);
  size_t streamed() const { return streamed_; }
  int64_t read_offset() const { return read_offset_; }
  // The state of another engine's detokenizer (a KV hand-off, docs/pd.md): the text is
  // history-dependent (held tails, U+FFFD for ill-formed ones), so it moves as it is.
  void restore(std::string text, int64_t read_offset, size_t streamed) {
    text_ = std::move(text);
    read_offset_ = read_offset;
    streamed_ = streamed;
  }

 private:
  std::string text_;
  int64_t read_offset_ = 0;  // output tokens [0, read_offset) are in text_
  size_t streamed_ = 0;      // text_[0, streamed) was handed out
};

// Where a stop string starts in `text`, searching only where a match could involve the
// last `new_bytes` bytes. Returns {position, index into stops}, or {npos, -1}.
struct StopMatch {
  size_t pos = std::string::npos;
  int64_t index = -1;
};
StopMatch find_stop_string(const std::string& text, size_t new_bytes,
                           const std::vector<std::string>& stops);

// Bytes at the end of `text` that are a proper prefix of some stop string, i.e. text that
// must not be streamed yet because the next token could complete a stop string.
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops);

// Limits that do not depend on the request.
struct StopLimits {
  int32_t eos_token_id = -1;                    // -1: none
  int64_t max_model_len = INT64_MAX;            // prompt + output tokens at most
  const model::TextTokenizer* tokenizer = nullptr;  // needed for stop strings and text
};

// Checks the request after one output token was appended (the last in r.tokens): updates
// its text, and on a stop sets status, stop_reason and truncates the text. Order: EOS,
// stop token ids, stop strings, then length (a token that both matches and hits
// max_tokens reports "stop"). Returns true when the request finished.
bool check_stop(Request& r, const StopLimits& limits);

}  // namespace troupe::runtime
