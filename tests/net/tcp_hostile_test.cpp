// The TCP API (net/tcp, docs/serve.md "TCP API") against a hostile client, end to end
// over real sockets on 127.0.0.1: invalid UTF-8 in every kind of field, NaN, +-Inf and
// out-of-range numbers, garbage and non-map payloads, lengths past the limit, truncated
// frames then a disconnect, and many connections holding partial frames against the
// server-wide buffer cap. After each bad input a good request, on the same connection
// (where it is still open) and on a new one, must get the same text as the request made
// before any bad input; and the daemon must never report a handler that threw. Non-finite
// numbers on the HTTP API are a 400 naming the field as well. An in-process TcpServer
// shows what partial frames hold: a length header alone holds one small first chunk, a
// payload's buffer grows with its bytes, and the sum over connections stays under the cap;
// and an engine call that throws costs its frame an error frame, not the connection.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/http/engine_bridge.h"
#include "net/http/server.h"
#include "net/http_test_client.h"
#include "net/scripted_engine.h"
#include "net/tcp/frame.h"
#include "net/tcp/server.h"
#include "net/tcp_test_client.h"
#include "support/golden.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;
namespace wire = troupe::net::tcp;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
constexpr size_t kMaxFrame = 65536;         // --max-body-bytes of the daemon below
constexpr size_t kMaxBuffered = 4 * 65536;  // its --tcp-max-buffered-bytes
const std::string kPrompt = "Once upon a time";
constexpr int kTokens = 5;

// A frame header announcing `n` payload bytes.
std::string header(uint32_t n) {
  std::string h(wire::kFrameHeaderBytes, '\0');
  for (int i = 0; i < 4; ++i) h[i] = char((n >> (24 - 8 * i)) & 0xff);
  return h;
}

std::string raw_frame(const std::string& payload) {
  return header(uint32_t(payload.size())) + payload;
}

std::string message_of(const json& m) {
  return m.contains("message") && m["message"].is_string() ? m["message"].get<std::string>() : "";
}

// --- the daemon ---------------------------------------------------------------------------

class TcpHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len", "256",
                          "--max-body-bytes", std::to_string(kMaxFrame), "--tcp-max-buffered-bytes",
                          std::to_string(kMaxBuffered)});
    http_port_ = daemon_->port();
    ASSERT_NE(http_port_, 0) << daemon_->output();
    ASSERT_TRUE(daemon_->wait_ready(http_port_)) << daemon_->output();
    port_ = tcp_port_of(*daemon_);
    ASSERT_NE(port_, 0) << daemon_->output();
    // The text every good request must get, asked for before any bad input.
    TcpClient c(port_);
    reference_ = good_text(c, "before");
    ASSERT_FALSE(reference_.empty());
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->output();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void TearDown() override {
    // No handler threw (server.cpp logs one at error as "[error] tcp: ..."; refused frames
    // are warnings) and nothing escaped to the I/O loop ("[error] tcp: an I/O handler threw").
    EXPECT_EQ(daemon_->output().find("[error] tcp:"), std::string::npos) << daemon_->output();
  }

  // The greedy text of the good request on `c` ("" if it failed).
  static std::string good_text(TcpClient& c, const std::string& id) {
    if (!c.send(submit(id, kPrompt, kTokens))) return "";
    std::map<std::string, TcpResult> r = {{json(id).dump(), {}}};
    read_until_done(c, r);
    const TcpResult& got = r[json(id).dump()];
    if (!got.done.is_object()) return "";
    EXPECT_EQ(got.done["finish_reason"], "length") << got.done.dump();
    return got.text;
  }
  // A good request on `c` and on a new connection both get the reference text.
  static void expect_still_serving(TcpClient* c, const std::string& after) {
    if (c) {
      EXPECT_EQ(good_text(*c, "same"), reference_) << "same connection, after " << after;
    }
    TcpClient fresh(port_);
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(good_text(fresh, "new"), reference_) << "new connection, after " << after;
  }

  struct Case {
    std::string what;
    std::string bytes;  // one whole frame
    json id;            // expected in the error frame
    std::string says;   // part of its message
  };
  // Each case on one connection: an error frame, then the connection (and a new one)
  // serve the good request.
  static void expect_error_frames(const std::vector<Case>& cases) {
    TcpClient c(port_);
    ASSERT_TRUE(c.ok());
    for (const Case& k : cases) {
      SCOPED_TRACE(k.what);
      ASSERT_TRUE(c.send_raw(k.bytes));
      const std::optional<json> m = c.read();
      ASSERT_TRUE(m) << "no answer";
      // Printed with replacement characters: an echo of invalid bytes must fail, not throw.
      const std::string shown = m->dump(-1, ' ', false, json::error_handler_t::replace);
      EXPECT_EQ((*m)["type"], "error") << shown;
      EXPECT_TRUE((*m)["id"] == k.id) << shown;
      EXPECT_NE(message_of(*m).find(k.says), std::string::npos)
          << "'" << message_of(*m) << "' lacks '" << k.says << "'";
      expect_still_serving(&c, k.what);
    }
  }

  static inline Daemon* daemon_ = nullptr;
  static inline uint16_t port_ = 0;
  static inline uint16_t http_port_ = 0;
  static inline std::string reference_;
};

json frame_with(const json& id, const std::string& field, const json& value) {
  json m = submit(id, kPrompt, kTokens);
  m[field] = value;
  return m;
}

TEST_F(TcpHostile, InvalidUtf8InAnyFieldIsAnErrorFrameNamingIt) {
  const std::string bad = "ok\xff\xfe";
  json bad_key = submit(12, kPrompt, kTokens);
  bad_key[std::string("\xc3\x28")] = 1;
  json nested = submit(13, kPrompt, kTokens);
  nested["extra"] = {{"k", json::array({"fine", std::string("\xc0\x80")})}};  // overlong NUL
  const std::vector<Case> cases = {
      {"prompt", wire::encode_frame(frame_with(1, "prompt", bad)), 1,
       "'prompt' is not valid UTF-8"},
      {"prompt, a lone surrogate",
       wire::encode_frame(frame_with(2, "prompt", std::string("a\xed\xa0\x80"))), 2,
       "'prompt' is not valid UTF-8"},
      {"prompt, cut in a character",
       wire::encode_frame(frame_with(3, "prompt", std::string("abc\xe2\x82"))), 3,
       "'prompt' is not valid UTF-8"},
      {"prompt, above U+10FFFF",
       wire::encode_frame(frame_with(4, "prompt", std::string("\xf4\x90\x80\x80"))), 4,
       "'prompt' is not valid UTF-8"},
      {"stop string", wire::encode_frame(frame_with(5, "stop", bad)), 5,
       "'stop' is not valid UTF-8"},
      {"stop list", wire::encode_frame(frame_with(6, "stop", json::array({"fine", bad}))), 6,
       "'stop[1]' is not valid UTF-8"},
      {"string id", wire::encode_frame(frame_with(bad, "id", bad)), nullptr,
       "'id' is not valid UTF-8"},
      {"type", wire::encode_frame(frame_with(8, "type", bad)), 8, "'type' is not valid UTF-8"},
      {"a number field sent as a str", wire::encode_frame(frame_with(9, "max_tokens", bad)), 9,
       "'max_tokens' is not valid UTF-8"},
      {"temperature as a str", wire::encode_frame(frame_with(10, "temperature", bad)), 10,
       "'temperature' is not valid UTF-8"},
      {"api_key", wire::encode_frame(frame_with(11, "api_key", bad)), 11,
       "'api_key' is not valid UTF-8"},
      {"a field name", wire::encode_frame(bad_key), 12, "a field name is not valid UTF-8"},
      {"nested in an ignored field", wire::encode_frame(nested), 13,
       "'extra.k[1]' is not valid UTF-8"},
      {"abort id", wire::encode_frame({{"type", "abort"}, {"id", bad}}), nullptr,
       "'id' is not valid UTF-8"},
      {"abort, another field", wire::encode_frame({{"type", "abort"}, {"id", 14}, {"why", bad}}),
       14, "'why' is not valid UTF-8"},
      {"a number field as a valid str", wire::encode_frame(frame_with(15, "max_tokens", "12")), 15,
       "'max_tokens' must be an integer"},
      {"an unknown type, long", wire::encode_frame(frame_with(16, "type", std::string(20000, 'x'))),
       16, "unknown frame type \"xxxx"},
  };
  expect_error_frames(cases);

  // Valid UTF-8 of every length passes (2-, 3- and 4-byte characters, and U+0000).
  TcpClient c(port_);
  ASSERT_TRUE(c.send(
      submit("utf8 \xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80",
             std::string("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80") + std::string(1, '\0'), 3)));
  std::map<std::string, TcpResult> r = {
      {json("utf8 \xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80").dump(), {}}};
  read_until_done(c, r);
  EXPECT_EQ(r.begin()->second.done["finish_reason"], "length") << r.begin()->second.done.dump();
}

TEST_F(TcpHostile, NonFiniteAndOutOfRangeNumbersAreErrorFramesNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // {"type": "submit", "id": 40, "prompt": "x", "temperature": float32 NaN} by hand:
  // encode_frame writes float64 only.
  const std::string f32_nan =
      raw_frame(std::string("\x84\xa4type\xa6submit\xa2id\x28\xa6prompt\xa1x"
                            "\xabtemperature\xca\x7f\xc0\x00\x00",
                            43));
  const std::vector<Case> cases = {
      {"temperature NaN", wire::encode_frame(frame_with(20, "temperature", nan)), 20,
       "'temperature' must be a finite number, got NaN"},
      {"temperature Inf", wire::encode_frame(frame_with(21, "temperature", inf)), 21,
       "'temperature' must be a finite number, got Infinity"},
      {"temperature -Inf", wire::encode_frame(frame_with(22, "temperature", -inf)), 22,
       "'temperature' must be a finite number, got -Infinity"},
      {"temperature 1e300", wire::encode_frame(frame_with(23, "temperature", 1e300)), 23,
       "'temperature'"},
      {"top_p NaN", wire::encode_frame(frame_with(24, "top_p", nan)), 24,
       "'top_p' must be a finite number"},
      {"min_p Inf", wire::encode_frame(frame_with(25, "min_p", inf)), 25,
       "'min_p' must be a finite number"},
      {"max_tokens Inf", wire::encode_frame(frame_with(26, "max_tokens", inf)), 26,
       "'max_tokens' must be an integer, got Infinity"},
      {"max_tokens NaN", wire::encode_frame(frame_with(27, "max_tokens", nan)), 27,
       "'max_tokens' must be an integer, got NaN"},
      {"max_tokens -Inf", wire::encode_frame(frame_with(28, "max_tokens", -inf)), 28,
       "'max_tokens' must be an integer, got -Infinity"},
      {"max_tokens 1e300", wire::encode_frame(frame_with(29, "max_tokens", 1e300)), 29,
       "'max_tokens' must be an integer in the int64 range"},
      {"max_tokens 2^64-1", wire::encode_frame(frame_with(30, "max_tokens", UINT64_MAX)), 30,
       "'max_tokens' must be an integer in the int64 range"},
      {"max_tokens 1.5", wire::encode_frame(frame_with(31, "max_tokens", 1.5)), 31,
       "'max_tokens' must be an integer"},
      {"max_tokens too many", wire::encode_frame(frame_with(32, "max_tokens", 1000000)), 32,
       "'max_tokens' is too large"},
      {"top_k NaN", wire::encode_frame(frame_with(33, "top_k", nan)), 33,
       "'top_k' must be an integer, got NaN"},
      {"top_k 2^40", wire::encode_frame(frame_with(34, "top_k", int64_t(1) << 40)), 34, "'top_k'"},
      {"seed Inf", wire::encode_frame(frame_with(35, "seed", inf)), 35,
       "'seed' must be an integer, got Infinity"},
      {"seed 2^64-1", wire::encode_frame(frame_with(36, "seed", UINT64_MAX)), 36,
       "'seed' must be an integer in the int64 range"},
      {"logprobs NaN", wire::encode_frame(frame_with(37, "logprobs", nan)), 37,
       "'logprobs' must be an integer, got NaN"},
      {"logprobs -Inf", wire::encode_frame(frame_with(38, "logprobs", -inf)), 38,
       "'logprobs' must be an integer"},
      {"a token id NaN",
       wire::encode_frame({{"type", "submit"}, {"id", 39}, {"tokens", json::array({1, nan})}}), 39,
       "'tokens'"},
      {"temperature float32 NaN", f32_nan, 40, "'temperature' must be a finite number, got NaN"},
      {"id NaN", wire::encode_frame(frame_with(nan, "id", nan)), nullptr,
       "'id' must be an integer or a string"},
  };
  expect_error_frames(cases);
  // An integral float is an integer, as on HTTP (pydantic's rule).
  TcpClient c(port_);
  ASSERT_TRUE(c.send(frame_with(41, "max_tokens", double(kTokens))));
  std::map<std::string, TcpResult> r = {{"41", {}}};
  read_until_done(c, r);
  EXPECT_EQ(r["41"].text, reference_);
}

TEST_F(TcpHostile, MalformedPayloadsAreErrorFrames) {
  const std::vector<Case> cases = {
      {"empty payload", raw_frame(""), nullptr, "malformed frame"},
      {"a never-used byte", raw_frame("\xc1"), nullptr, "malformed frame"},
      {"garbage", raw_frame(std::string("\x17\xfe\x99garbage\x00\x01", 12)), nullptr,
       "malformed frame"},
      {"an array", raw_frame("\x92\x01\x02"), nullptr, "must be a msgpack map"},
      {"an integer", raw_frame("\x05"), nullptr, "must be a msgpack map"},
      {"a string",
       raw_frame("\xa3"
                 "abc"),
       nullptr, "must be a msgpack map"},
      {"nil", raw_frame("\xc0"), nullptr, "must be a msgpack map"},
      {"an integer key", raw_frame("\x81\x01\x02"), nullptr, "malformed frame"},
      {"a bin value", raw_frame("\x81\xa1x\xc4\x02zz"), nullptr, "malformed frame"},
      {"an ext value", raw_frame("\x81\xa1x\xd4\x01z"), nullptr, "malformed frame"},
      {"nested too deep", raw_frame("\x81\xa1x" + std::string(200, '\x91') + "\x01"), nullptr,
       "malformed frame"},
      {"a truncated map", raw_frame("\x82\xa4type\xa6submit"), nullptr, "malformed frame"},
      {"trailing bytes", raw_frame("\x80\x80"), nullptr, "malformed frame"},
      {"an array claiming 2^32-1 elements", raw_frame("\x81\xa1x\xdd\xff\xff\xff\xff\x01"), nullptr,
       "malformed frame"},
      {"a map claiming 2^32-1 pairs", raw_frame("\xdf\xff\xff\xff\xff\xa1x\x01"), nullptr,
       "malformed frame"},
      {"a str claiming 4 GiB",
       raw_frame("\x81\xa1x\xdb\xff\xff\xff\xff"
                 "abc"),
       nullptr, "malformed frame"},
      {"a map without id", wire::encode_frame({{"type", "submit"}, {"prompt", "x"}}), nullptr,
       "'id'"},
      {"an array id", wire::encode_frame({{"type", "submit"}, {"id", {1, 2}}, {"prompt", "x"}}),
       nullptr, "'id'"},
  };
  expect_error_frames(cases);
}

// A length past the limit cannot be skipped: an error frame, then the connection closes.
TEST_F(TcpHostile, LengthsPastTheLimitGetAnErrorFrameThenAClose) {
  for (const uint32_t n : {uint32_t(kMaxFrame + 1), uint32_t(64u << 20), uint32_t(0xffffffff)}) {
    SCOPED_TRACE(n);
    TcpClient c(port_);
    ASSERT_TRUE(c.send_raw(header(n) + "abc"));
    const std::optional<json> e = c.read();
    ASSERT_TRUE(e);
    EXPECT_EQ((*e)["type"], "error");
    EXPECT_TRUE((*e)["id"].is_null());
    EXPECT_NE(
        message_of(*e).find("a frame of " + std::to_string(n) + " bytes is over the limit of " +
                            std::to_string(kMaxFrame) + " bytes"),
        std::string::npos)
        << message_of(*e);
    EXPECT_FALSE(c.read());  // closed
    expect_still_serving(nullptr, "a length of " + std::to_string(n));
  }
  // The whole frame once more than the limit, sent at once (the client does not wait).
  TcpClient c(port_);
  ASSERT_TRUE(c.send_raw(raw_frame(std::string(kMaxFrame + 10, '\xc0'))));
  const std::optional<json> e = c.read();
  ASSERT_TRUE(e);
  EXPECT_NE(message_of(*e).find("over the limit"), std::string::npos) << message_of(*e);
  EXPECT_FALSE(c.read());
  expect_still_serving(nullptr, "an oversized frame sent whole");
}

// A frame cut off by a disconnect (in its header, its payload, or a length alone that
// announces 64 KiB with nothing after it) leaves nothing behind.
TEST_F(TcpHostile, TruncatedFramesThenDisconnectLeaveTheServerServing) {
  const std::string whole = wire::encode_frame(submit(50, kPrompt, kTokens));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"two bytes of a header", whole.substr(0, 2)},
      {"a header alone", whole.substr(0, 4)},
      {"a header announcing 64 KiB alone", header(uint32_t(kMaxFrame))},
      {"a header announcing 64 KiB and a few bytes", header(uint32_t(kMaxFrame)) + "\x85\xa4type"},
      {"all but the last byte", whole.substr(0, whole.size() - 1)},
      {"a good frame and half of the next", whole + whole.substr(0, 9)},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    {
      TcpClient c(port_);
      ASSERT_TRUE(c.send_raw(bytes));
    }  // disconnects
    expect_still_serving(nullptr, what);
  }
  // Held open instead: the connection still serves once the frame is completed.
  TcpClient c(port_);
  ASSERT_TRUE(c.send_raw(whole.substr(0, 7)));
  expect_still_serving(nullptr, "a partial frame held open");
  ASSERT_TRUE(c.send_raw(whole.substr(7)));
  std::map<std::string, TcpResult> r = {{"50", {}}};
  read_until_done(c, r);
  EXPECT_EQ(r["50"].text, reference_);
}

// Connections holding partial frames share kMaxBuffered: 8 connections each holding
// 40000 bytes of a 64050-byte frame need a 64050-byte buffer each, so at most 4 fit; the
// rest get an error frame naming tcp-max-buffered-bytes and are closed. Small frames of
// other clients still pass meanwhile, and the survivors get their text once they finish.
TEST_F(TcpHostile, PartialFramesShareTheServerWideCap) {
  constexpr int kConnections = 8;
  constexpr size_t kSent = 40000;
  std::vector<std::unique_ptr<TcpClient>> conns;
  std::vector<std::string> frames;
  for (int i = 0; i < kConnections; ++i) {
    frames.push_back(
        wire::encode_frame(submit(100 + i, kPrompt, kTokens, {{"pad", std::string(64000, 'p')}})));
    ASSERT_LE(frames.back().size() - 4, kMaxFrame);
    ASSERT_GT(5 * (frames.back().size() - 4), kMaxBuffered);
    ASSERT_LE(4 * (frames.back().size() - 4), kMaxBuffered);
    conns.push_back(std::make_unique<TcpClient>(port_));
    ASSERT_TRUE(conns.back()->send_raw(frames.back().substr(0, 4 + kSent)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The refused ones answer (an error frame, then the end); the others wait for bytes.
  std::vector<bool> refused(kConnections, false);
  auto count_refused = [&] {
    int n = 0;
    for (int i = 0; i < kConnections; ++i) {
      if (!refused[i] && conns[i]->readable(0)) refused[i] = true;
      n += refused[i] ? 1 : 0;
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return count_refused() >= kConnections - 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nothing else changes
  const int n_refused = count_refused();
  EXPECT_GE(n_refused, kConnections - 4);
  EXPECT_LT(n_refused, kConnections);  // the first one, at least, fits
  EXPECT_FALSE(refused[0]);

  expect_still_serving(nullptr, "partial frames holding the cap");

  for (int i = 0; i < kConnections; ++i) {
    SCOPED_TRACE(i);
    TcpClient& c = *conns[i];
    if (refused[i]) {
      const std::optional<json> e = c.read();
      ASSERT_TRUE(e);
      EXPECT_EQ((*e)["type"], "error");
      EXPECT_TRUE((*e)["id"].is_null());
      EXPECT_NE(message_of(*e).find("tcp-max-buffered-bytes"), std::string::npos) << message_of(*e);
      EXPECT_FALSE(c.read());  // closed
    } else {
      ASSERT_TRUE(c.send_raw(frames[i].substr(4 + kSent)));
      const std::string id = std::to_string(100 + i);
      std::map<std::string, TcpResult> r = {{id, {}}};
      read_until_done(c, r);
      EXPECT_EQ(r[id].text, reference_);
      EXPECT_EQ(good_text(c, "again"), reference_);  // the budget is back: the next frame passes
    }
  }
  expect_still_serving(nullptr, "the cap");
}

// The HTTP API parses JSON: no NaN, but a number beyond the double range (1e999) is
// refused with a 400 naming its field, and the next request gets the same text.
TEST_F(TcpHostile, NumbersBeyondTheDoubleRangeAre400OnHttp) {
  auto completion = [&](const std::string& extra) {
    return http(http_port_, "POST", "/v1/completions",
                R"({"prompt": ")" + kPrompt + R"(", "max_tokens": )" + std::to_string(kTokens) +
                    R"(, "temperature": 0, "ignore_eos": true)" + extra + "}");
  };
  const HttpResponse before = completion("");
  ASSERT_EQ(before.status, 200) << before.body;
  const std::string text = json::parse(before.body)["choices"][0]["text"];
  EXPECT_EQ(text, reference_);
  struct HttpCase {
    std::string extra, param, says;
  };
  const std::vector<HttpCase> cases = {
      {R"(, "top_p": 1e999)", "top_p", "'top_p' must be a finite number, got 1e999"},
      {R"(, "min_p": -1e999)", "min_p", "'min_p' must be a finite number, got -1e999"},
      {R"(, "seed": 1E+400)", "seed", "'seed' must be a finite number, got 1E+400"},
      {R"(, "stop_token_ids": [1, 2, 9e9999])", "stop_token_ids",
       "'stop_token_ids[2]' must be a finite number"},
      {R"(, "stream_options": {"include_usage": 1e999})", "stream_options",
       "'stream_options.include_usage'"},
      {R"(, "logprobs": 1e999, "top_p": 2)", "logprobs", "'logprobs'"},
      {R"(, "top_k": 1e308)", "top_k", "'top_k' must be an integer in the int64 range"},
  };
  for (const HttpCase& k : cases) {
    SCOPED_TRACE(k.extra);
    const HttpResponse r = completion(k.extra);
    EXPECT_EQ(r.status, 400) << r.body;
    const json err = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << r.body;
    EXPECT_EQ(err["error"]["param"], k.param) << r.body;
    EXPECT_NE(err["error"]["message"].get<std::string>().find(k.says), std::string::npos) << r.body;
    const HttpResponse again = completion("");
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(json::parse(again.body)["choices"][0]["text"], text);
  }
  // Still a syntax error when the body is also malformed before the number.
  const HttpResponse r = completion(R"(, "top_p": , 1e999)");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("not valid JSON"), std::string::npos) << r.body;
}

// --- the buffers, in process ------------------------------------------------------------

// A TcpServer without a backend: every whole frame is answered "the model is still
// loading", which is enough to watch its buffers.
class TcpBuffers : public ::testing::Test {
 protected:
  void start(size_t max_frame, size_t max_buffered, size_t max_connections = 0) {
    net::tcp::TcpServerOptions o;
    o.port = 0;
    o.max_frame_bytes = max_frame;
    o.max_buffered_bytes = max_buffered;
    o.max_connections = max_connections;
    server_ = std::make_unique<net::tcp::TcpServer>(o);
    port_ = server_->listen();
  }
  // A whole frame on a new connection is answered.
  void expect_answered() {
    TcpClient c(port_);
    ASSERT_TRUE(c.send(submit(1, "x", 1)));
    const std::optional<json> m = c.read();
    ASSERT_TRUE(m);
    EXPECT_EQ(message_of(*m), "the model is still loading");
  }
  std::unique_ptr<net::tcp::TcpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(TcpBuffers, ALengthAloneHoldsOneSmallChunkAndBuffersGrowWithTheirBytes) {
  start(64u << 20, 256u << 20);
  constexpr size_t kConns = 16;
  std::vector<std::unique_ptr<TcpClient>> conns;
  for (size_t i = 0; i < kConns; ++i) {
    conns.push_back(std::make_unique<TcpClient>(port_));
    ASSERT_TRUE(conns.back()->send_raw(header(64u << 20)));  // 64 MiB announced
  }
  // 16 x 64 MiB announced; 16 first chunks held.
  ASSERT_TRUE(eventually([&] {
    return server_->buffered_bytes() == kConns * net::tcp::kFirstReadChunk;
  })) << server_->buffered_bytes();
  for (auto& c : conns) ASSERT_TRUE(c->send_raw("a few bytes"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server_->buffered_bytes(), kConns * net::tcp::kFirstReadChunk);
  expect_answered();

  // One of them sends 1 MiB more: its buffer doubles as the bytes come, to at most twice them.
  ASSERT_TRUE(conns[0]->send_raw(std::string(1u << 20, 'z')));
  const size_t others = (kConns - 1) * net::tcp::kFirstReadChunk;
  ASSERT_TRUE(eventually([&] { return server_->buffered_bytes() >= others + (1u << 20); }))
      << server_->buffered_bytes();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(server_->buffered_bytes(), others + (2u << 20) + net::tcp::kFirstReadChunk);
  EXPECT_LE(server_->peak_buffered_bytes(), others + (2u << 20) + net::tcp::kFirstReadChunk);
  expect_answered();

  conns.clear();  // disconnects: every buffer is given back
  EXPECT_TRUE(eventually([&] { return server_->buffered_bytes() == 0; }))
      << server_->buffered_bytes();
  expect_answered();
}

TEST_F(TcpBuffers, TheSumOverConnectionsStaysUnderTheCap) {
  constexpr size_t kCap = 1u << 20;
  start(kCap, kCap);
  constexpr int kConns = 12;
  // 300000 bytes received of 500000 hold a 500000-byte buffer (doubling from 4 KiB passes
  // 262144): 2 fit in the cap, 3 do not.
  constexpr size_t kFrame = 500000, kSent = 300000;
  std::vector<std::unique_ptr<TcpClient>> conns;
  for (int i = 0; i < kConns; ++i) {
    conns.push_back(std::make_unique<TcpClient>(port_));
    ASSERT_TRUE(conns.back()->send_raw(header(uint32_t(kFrame)) + std::string(kSent, '\xc0')));
  }
  // At most 2 fit; the others are refused, each with an error frame.
  int refused = 0;
  for (auto& c : conns) {
    if (!c->readable(2000)) continue;
    const std::optional<json> e = c->read();
    ASSERT_TRUE(e);
    EXPECT_NE(message_of(*e).find("tcp-max-buffered-bytes"), std::string::npos) << message_of(*e);
    EXPECT_FALSE(c->read());
    ++refused;
  }
  EXPECT_GE(refused, kConns - 2);
  EXPECT_LE(server_->peak_buffered_bytes(), kCap);
  EXPECT_LE(server_->buffered_bytes(), kCap);
  expect_answered();  // a small frame still fits
  // The survivors finish their frames: answered, and their buffers given back.
  for (auto& c : conns) {
    if (c->readable(0)) continue;  // refused (closed)
    ASSERT_TRUE(c->send_raw(std::string(kFrame - kSent, '\xc0')));
    const std::optional<json> m = c->read();
    ASSERT_TRUE(m);
    EXPECT_NE(message_of(*m).find("malformed frame"), std::string::npos) << message_of(*m);
  }
  EXPECT_TRUE(eventually([&] { return server_->buffered_bytes() == 0; }))
      << server_->buffered_bytes();
  EXPECT_LE(server_->peak_buffered_bytes(), kCap);
}

TEST_F(TcpBuffers, TheConnectionOverTheCapGetsAnErrorFrameAndIsClosed) {
  start(1u << 20, 1u << 20, /*max_connections=*/2);
  std::vector<std::unique_ptr<TcpClient>> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(std::make_unique<TcpClient>(port_));
    ASSERT_TRUE(open.back()->send(submit(1, "x", 1)));  // answered: they are in
    ASSERT_TRUE(open.back()->read());
  }
  TcpClient third(port_);
  const std::optional<json> refused = third.read();
  ASSERT_TRUE(refused);
  EXPECT_NE(message_of(*refused).find("too many connections"), std::string::npos)
      << message_of(*refused);
  EXPECT_FALSE(third.read());  // then closed
  open.pop_back();             // a place comes free
  EXPECT_TRUE(eventually([&] {
    TcpClient c(port_);
    if (!c.send(submit(1, "x", 1))) return false;
    const std::optional<json> m = c.read();
    return m && message_of(*m) == "the model is still loading";
  }));
}

// --- a failing engine, in process ---------------------------------------------------------

// A TCP server on port 0 in front of a ScriptedEngine and the golden tokenizer.
struct FlakyServer {
  FlakyServer() {
    port = server.listen();
    server.set_backend(scripted_backend(engine, /*max_model_len=*/64));
  }
  ScriptedEngine engine;
  net::tcp::TcpServer server{[] {
    net::tcp::TcpServerOptions o;
    o.port = 0;  // the OS picks one
    return o;
  }()};
  uint16_t port = 0;
};

TEST(TcpFaults, AnEngineThatThrowsGetsAnErrorFrameAndTheConnectionGoesOn) {
  FlakyServer f;
  ScriptedEngine& engine = f.engine;
  net::tcp::TcpServer& server = f.server;
  const uint16_t port = f.port;

  TcpClient c(port);
  auto by_ids = [](int id, int32_t token) {
    return json{{"type", "submit"}, {"id", id}, {"tokens", {token}}, {"max_tokens", 1}};
  };
  ASSERT_TRUE(c.send(by_ids(1, 666)));
  const std::optional<json> e = c.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  EXPECT_EQ((*e)["id"], 1);
  EXPECT_NE(message_of(*e).find("internal error while handling the frame"), std::string::npos)
      << message_of(*e);
  // Nothing was recorded: the same id is free, nothing stays busy (the error frame holds
  // the server busy only until it is written), and the next submit runs.
  EXPECT_TRUE(server.wait_idle(std::chrono::seconds(5)));
  ASSERT_TRUE(c.send(by_ids(1, 5)));
  std::map<std::string, TcpResult> r = {{"1", {}}};
  read_until_done(c, r);
  EXPECT_EQ(r["1"].text, "hello world");
  EXPECT_EQ(r["1"].done["finish_reason"], "length");
  EXPECT_TRUE(server.wait_idle(std::chrono::seconds(5)));
  engine.stop();
  server.stop();
}

// A 16 MB prompt takes the tokenizer a while: it is parsed off the I/O thread, so a small
// request on another connection is answered first.
TEST(TcpFaults, ALongPromptDoesNotStallOtherConnections) {
  FlakyServer f;
  ScriptedEngine& engine = f.engine;
  net::tcp::TcpServer& server = f.server;
  const uint16_t port = f.port;

  TcpClient big(port), small(port);
  std::string prompt;
  for (size_t i = 0; prompt.size() < (16u << 20); ++i)
    prompt += "word" + std::to_string(i % 1000) + " ";
  ASSERT_TRUE(big.send(submit(1, prompt, 1)));
  ASSERT_FALSE(big.readable(0));
  ASSERT_TRUE(small.send(json{{"type", "submit"}, {"id", 2}, {"tokens", {5}}, {"max_tokens", 1}}));
  std::map<std::string, TcpResult> r = {{"2", {}}};
  read_until_done(small, r);
  EXPECT_EQ(r["2"].text, "hello world");
  EXPECT_FALSE(big.readable(0)) << "the long prompt was answered first: nothing was gained";
  const std::optional<json> e = big.read();  // its answer: too long for the context
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  EXPECT_NE(message_of(*e).find("maximum context length is 64 tokens"), std::string::npos)
      << message_of(*e);
  EXPECT_TRUE(eventually([&] { return server.buffered_bytes() == 0; }));
  engine.stop();
  server.stop();
}

}  // namespace
}  // namespace troupe::testing
