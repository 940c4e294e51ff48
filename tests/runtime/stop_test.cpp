// Stop conditions and the incremental detokenizer, on the golden tiny tokenizer: text
// built token by token equals the one-shot decode, incomplete UTF-8 is held back, stop
// strings match across token boundaries and cut the text like vLLM, EOS / stop ids /
// length in their documented order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/tokenizer.h"
#include "runtime/request.h"
#include "runtime/stop_checker.h"
#include "support/test_paths.h"

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

const model::Tokenizer& tok() {
  static const model::Tokenizer t =
      model::Tokenizer::load(std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7/tokenizer.json");
  return t;
}

int32_t byte_id(uint8_t b) {
  return 5 + b;
}  // the tiny layout: id 5 + b is byte b
constexpr int32_t kEos = 1;  // <｜end▁of▁sentence｜>

Request make_request(RequestParams p = {}) {
  if (p.max_tokens == 16) p.max_tokens = 1000;
  const Ids prompt = {10, 11, 12};
  return Request(7, prompt, std::move(p), 0);
}

StopLimits limits() {
  StopLimits l;
  l.eos_token_id = kEos;
  l.tokenizer = &tok();
  return l;
}

// Feeds `ids` one at a time; returns how many were consumed before the request stopped.
size_t feed(Request& r, const Ids& ids, const StopLimits& l) {
  for (size_t i = 0; i < ids.size(); ++i) {
    r.tokens.push_back(ids[i]);
    if (check_stop(r, l)) return i + 1;
  }
  return ids.size();
}

TEST(StopDetokenizer, IncrementalTextEqualsOneShotDecode) {
  const std::vector<std::string> texts = {
      "Once upon a time, the cat sat on the mat.",
      "h\xC3\xA9llo w\xC3\xB6rld \xE2\x88\x91 x \xF0\x9F\x99\x82 done",  // é ö ∑ 🙂
      "\xF0\x9F\x98\x80\xF0\x9F\x98\x80",                                // two emoji
      "a",
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const Ids ids = tok().encode(text, false);
    Detokenizer d;
    Ids out;
    for (int32_t id : ids) {
      out.push_back(id);
      d.update(tok(), out, true);
      const std::string full = tok().decode(out);
      // Only whole characters are emitted, and always a prefix of the full decode.
      EXPECT_EQ(full.compare(0, d.text().size(), d.text()), 0);
      EXPECT_EQ(d.text().find("\xEF\xBF\xBD"), std::string::npos);
    }
    d.flush(tok(), out, true);
    EXPECT_EQ(d.text(), text);
  }
}

TEST(StopDetokenizer, HoldsBackAnIncompleteCharacter) {
  // 🙂 = F0 9F 99 82 as four byte tokens: nothing shows until the last byte.
  const Ids ids = {byte_id('x'), byte_id(0xF0), byte_id(0x9F), byte_id(0x99), byte_id(0x82)};
  const std::vector<std::string> expected = {"x", "x", "x", "x", "x\xF0\x9F\x99\x82"};
  Detokenizer d;
  Ids out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.push_back(ids[i]);
    d.update(tok(), out, true);
    EXPECT_EQ(d.text(), expected[i]) << "after token " << i;
  }
}

TEST(StopDetokenizer, IllFormedBytesAreNotHeldForever) {
  Detokenizer d;
  Ids out;
  for (int64_t i = 0; i < Detokenizer::kMaxHeldTokens; ++i) {
    out.push_back(byte_id(0xFF));  // never valid UTF-8
    d.update(tok(), out, true);
  }
  EXPECT_EQ(d.text().size(), size_t(Detokenizer::kMaxHeldTokens) * 3);  // U+FFFD each
}

TEST(StopStrings, FindAndHoldbackTable) {
  struct Case {
    std::string text;
    size_t new_bytes;
    std::vector<std::string> stops;
    size_t pos;
    int64_t index;
    size_t hold;
  };
  const size_t npos = std::string::npos;
  const std::vector<Case> cases = {
      {"hello world", 5, {"lo w"}, 3, 0, 0},      // starts before the new bytes
      {"hello world", 3, {"lo w"}, npos, -1, 0},  // ended before the new bytes: not new
      {"hello wor", 3, {"world"}, npos, -1, 3},   // "wor" may become "world"
      {"abcabc", 6, {"ca", "bc"}, 1, 1, 1},       // earliest match wins; "c" may start "ca"
      {"xx STO", 2, {"STOP", "ST"}, 3, 1, 3},     // holdback: "STO" is a prefix of STOP
      {"abc", 1, {}, npos, -1, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const StopMatch m = find_stop_string(c.text, c.new_bytes, c.stops);
    EXPECT_EQ(m.pos, c.pos);
    EXPECT_EQ(m.index, c.index);
    EXPECT_EQ(stop_holdback(c.text, c.stops), c.hold);
  }
}

TEST(StopStrings, MatchAcrossTokenBoundariesAndCutTheText) {
  const std::string text = "Once upon a time, the cat sat on the mat.";
  const Ids ids = tok().encode(text, false);
  struct Case {
    std::string stop;
    bool include;
  };
  for (const Case& c : std::vector<Case>{{"e, th", false}, {"e, th", true}, {"sat o", false}}) {
    SCOPED_TRACE(c.stop);
    // The stop string must really span tokens, else this test proves nothing.
    for (int32_t id : ids) ASSERT_EQ(tok().decode(Ids{id}).find(c.stop), std::string::npos);
    RequestParams p;
    p.stop = {c.stop};
    p.include_stop_str_in_output = c.include;
    Request r = make_request(p);
    const size_t used = feed(r, ids, limits());
    // Independently: the first token count whose one-shot decode contains the stop.
    size_t expect_used = 0;
    while (tok().decode(Ids(ids.begin(), ids.begin() + ++expect_used)).find(c.stop) ==
           std::string::npos) {
    }
    EXPECT_EQ(used, expect_used);
    EXPECT_EQ(r.status, RequestStatus::FinishedStopped);
    EXPECT_EQ(std::get<std::string>(r.stop_reason), c.stop);
    const size_t at = text.find(c.stop);
    EXPECT_EQ(r.detok.text(), text.substr(0, at + (c.include ? c.stop.size() : 0)));
    EXPECT_EQ(r.num_output_tokens(), int64_t(used));  // the tokens stay; the text is cut
  }
}

TEST(StopStrings, StreamedTextNeverShowsAStopPrefix) {
  const std::string text = "Once upon a time, the cat sat on the mat.";
  const Ids ids = tok().encode(text, false);
  RequestParams p;
  p.stop = {"cat sat", "mat!"};
  Request r = make_request(p);
  std::string streamed;
  for (int32_t id : ids) {
    r.tokens.push_back(id);
    const bool done = check_stop(r, limits());
    const std::string& t = r.detok.text();
    streamed += r.detok.take_stream(done ? t.size() : t.size() - stop_holdback(t, p.stop));
    EXPECT_EQ(streamed.find("cat"), std::string::npos) << "streamed: " << streamed;
    if (done) break;
  }
  EXPECT_EQ(streamed, "Once upon a time, the ");
}

TEST(StopTokens, EosStopIdsLengthTable) {
  struct Case {
    const char* name;
    Ids feed;
    bool ignore_eos;
    Ids stop_ids;
    int64_t max_tokens;
    int64_t max_model_len;
    RequestStatus status;
    size_t used;
    StopReason reason;
  };
  const auto F = RequestStatus::FinishedStopped, L = RequestStatus::FinishedLength,
             R = RequestStatus::Running;
  const std::vector<Case> cases = {
      {"eos", {20, kEos, 21}, false, {}, 100, 1000, F, 2, {}},
      {"ignore_eos", {20, kEos, 21}, true, {}, 100, 1000, R, 3, {}},
      {"stop id", {20, 30, 21}, false, {30}, 100, 1000, F, 2, int32_t(30)},
      {"eos as stop id with ignore_eos", {kEos}, true, {kEos}, 100, 1000, F, 1, int32_t(kEos)},
      {"max_tokens", {20, 21, 22, 23}, false, {}, 3, 1000, L, 3, {}},
      {"eos on the last allowed token says stop", {20, kEos}, false, {}, 2, 1000, F, 2, {}},
      {"max_model_len", {20, 21, 22}, false, {}, 100, 5, L, 2, {}},  // prompt is 3 tokens
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RequestParams p;
    p.ignore_eos = c.ignore_eos;
    p.stop_token_ids = c.stop_ids;
    p.max_tokens = c.max_tokens;
    Request r(1, Ids{10, 11, 12}, p, 0);
    r.status = RequestStatus::Running;
    StopLimits l = limits();
    l.max_model_len = c.max_model_len;
    EXPECT_EQ(feed(r, c.feed, l), c.used);
    EXPECT_EQ(r.status, c.status);
    EXPECT_EQ(r.stop_reason, c.reason);
    EXPECT_EQ(r.output().back(), c.feed[c.used - 1]);  // the stop token stays in the output
  }
}

TEST(StopTokens, StopTokenTextIsNotInTheOutput) {
  RequestParams p;
  p.skip_special_tokens = false;  // would show EOS's text if it were decoded
  Request r = make_request(p);
  const Ids hi = tok().encode("hi", false);
  Ids ids = hi;
  ids.push_back(kEos);
  feed(r, ids, limits());
  EXPECT_EQ(r.status, RequestStatus::FinishedStopped);
  EXPECT_EQ(r.detok.text(), "hi");
}

TEST(RequestParamsTest, ValidateNamesTheField) {
  RequestParams p;
  p.max_tokens = 0;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.sampling.top_p = 0.0f;
  EXPECT_THROW(p.validate(), Error);
  p = {};
  p.stop = {""};
  EXPECT_THROW(p.validate(), Error);
  EXPECT_NO_THROW(RequestParams{}.validate());
}

}  // namespace
}  // namespace troupe::runtime
