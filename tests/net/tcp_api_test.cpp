// The TCP API (net/tcp, docs/serve.md "TCP API"): the frame codec
// directly, then `troupe serve --tcp-port 0` end to end over a real socket: two requests
// in flight on one connection give the same greedy text as `troupe generate`, an abort
// mid-stream ends with finish_reason "abort", bad frames get error frames while the
// connection keeps working, an oversized length closes the connection, a disconnect aborts
// the connection's requests, SIGTERM lets a request in flight finish (exit 0), and a busy
// --tcp-port stops startup (exit 2, naming the port).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "net/http_test_client.h"
#include "net/tcp/frame.h"
#include "net/tcp_test_client.h"
#include "support/prometheus_text.h"
#include "support/run_troupe.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;
namespace wire = troupe::net::tcp;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

// --- frame codec --------------------------------------------------------------------------

TEST(TcpFrame, EncodesBigEndianLengthAndRoundTrips) {
  const json m = {{"type", "submit"}, {"id", -3}, {"tokens", {1, 2, 300000}}, {"top_p", 0.5},
                  {"ignore_eos", true}, {"stop", json::array()}, {"seed", nullptr}};
  const std::string f = wire::encode_frame(m);
  ASSERT_GE(f.size(), wire::kFrameHeaderBytes);
  const auto* h = reinterpret_cast<const unsigned char*>(f.data());
  EXPECT_EQ(wire::frame_length(h), f.size() - wire::kFrameHeaderBytes);
  const wire::FrameDecode d = wire::decode_payload(std::string_view(f).substr(wire::kFrameHeaderBytes));
  ASSERT_TRUE(d.message) << d.error;
  EXPECT_EQ(*d.message, m);
}

TEST(TcpFrame, LengthIsBigEndian) {
  const unsigned char h[4] = {0x01, 0x02, 0x03, 0x04};
  EXPECT_EQ(wire::frame_length(h), 0x01020304u);
  // {"a": 1} as msgpack is 0x81 0xa1 'a' 0x01: 4 bytes.
  EXPECT_EQ(wire::encode_frame({{"a", 1}}), std::string("\0\0\0\x04\x81\xa1" "a\x01", 8));
}

TEST(TcpFrame, RefusesWhatIsNotOneMap) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {std::string("\xc1", 1), "never-used byte"},
      {std::string("\x92\x01\x02", 3), "an array"},
      {std::string("\x81\xa1" "a", 3), "truncated map"},
      {std::string("\x81\x01\x02", 3), "integer key"},
      {std::string("\x80\x80", 2), "trailing bytes"},
      {std::string(100, '\x91'), "nested too deep"},
  };
  for (const auto& [payload, what] : cases) {
    const wire::FrameDecode d = wire::decode_payload(payload);
    EXPECT_FALSE(d.message) << what;
    EXPECT_NE(d.error.find("malformed frame"), std::string::npos) << what << ": " << d.error;
  }
}

using Result = TcpResult;

// --- end to end ---------------------------------------------------------------------------

class TcpApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon({kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len", "256",
                          "--max-body-bytes", "65536"});
    const uint16_t http_port = daemon_->port();
    ASSERT_NE(http_port, 0) << daemon_->output();
    ASSERT_TRUE(daemon_->wait_ready(http_port)) << daemon_->output();
    std::smatch m;
    const std::string out = daemon_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(listening on tcp://[^:\s]+:(\d+))"))) << out;
    port_ = uint16_t(std::stoi(m[1]));
    http_port_ = http_port;
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->output();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  static std::string generate(const std::string& prompt, int max_tokens) {
    const RunResult g = run_troupe("generate --model " + kModelDir + " --prompt '" + prompt +
                                   "' --max-tokens " + std::to_string(max_tokens) + " --ignore-eos");
    EXPECT_EQ(g.status, 0) << g.out;
    return g.out.ends_with("\n") ? g.out.substr(0, g.out.size() - 1) : g.out;
  }

  static Daemon* daemon_;
  static uint16_t port_;
  static uint16_t http_port_;
};
Daemon* TcpApi::daemon_ = nullptr;
uint16_t TcpApi::port_ = 0;
uint16_t TcpApi::http_port_ = 0;

TEST_F(TcpApi, TwoRequestsOnOneConnectionMatchGenerate) {
  TcpClient c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send(submit(1, "Once upon a time", 12)));
  ASSERT_TRUE(c.send(submit("b", "Tell me a story", 9)));
  std::map<std::string, Result> results = {{"1", {}}, {"\"b\"", {}}};
  read_until_done(c, results);
  const Result& a = results["1"];
  const Result& b = results["\"b\""];
  EXPECT_EQ(a.text, generate("Once upon a time", 12));
  // Against the HTTP completion as well: `troupe generate` drops an incomplete UTF-8 tail
  // that the server's detokenizer sends as U+FFFD (whether this output ends in one
  // depends on the CPU path's tokens: AVX-512 and AVX2 sum in different orders).
  const HttpResponse h = http(http_port_, "POST", "/v1/completions",
                              json{{"prompt", "Tell me a story"}, {"max_tokens", 9}, {"temperature", 0},
                                   {"ignore_eos", true}}.dump());
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(b.text, json::parse(h.body)["choices"][0]["text"].get<std::string>());
  const std::string kReplacement = "\xEF\xBF\xBD";
  const size_t cut = b.text.ends_with(kReplacement) ? kReplacement.size() : 0;
  EXPECT_EQ(b.text.substr(0, b.text.size() - cut), generate("Tell me a story", 9));
  EXPECT_EQ(a.tokens.size(), 12u);
  EXPECT_EQ(b.tokens.size(), 9u);
  EXPECT_GE(a.frames, 2);  // streamed, not sent whole
  EXPECT_EQ(a.done["finish_reason"], "length");
  EXPECT_EQ(a.done["usage"]["completion_tokens"], 12);
  EXPECT_EQ(b.done["usage"]["completion_tokens"], 9);
  EXPECT_GT(a.done["usage"]["prompt_tokens"].get<int>(), 1);
  EXPECT_EQ(a.done["usage"]["total_tokens"].get<int>(),
            a.done["usage"]["prompt_tokens"].get<int>() + 12);

  // The same prompt as token ids (from /tokenize) gives the same tokens.
  const HttpResponse t = http(http_port_, "POST", "/tokenize", json{{"prompt", "Once upon a time"}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  json by_ids = submit(2, "", 12);
  by_ids.erase("prompt");
  by_ids["tokens"] = json::parse(t.body)["tokens"];
  ASSERT_TRUE(c.send(by_ids));
  std::map<std::string, Result> again = {{"2", {}}};
  read_until_done(c, again);
  EXPECT_EQ(again["2"].tokens, a.tokens);
}

TEST_F(TcpApi, AbortMidStreamEndsWithAbort) {
  TcpClient c(port_);
  ASSERT_TRUE(c.send(submit(7, "Once upon a time", 200)));
  const std::optional<json> first = c.read();
  ASSERT_TRUE(first);
  ASSERT_EQ((*first)["type"], "tokens") << first->dump();
  ASSERT_TRUE(c.send({{"type", "abort"}, {"id", 7}}));
  std::map<std::string, Result> results = {{"7", {}}};
  read_until_done(c, results);
  EXPECT_EQ(results["7"].done["finish_reason"], "abort");
  EXPECT_LT(results["7"].done["usage"]["completion_tokens"].get<int>(), 200);
  // Aborting what is no longer in flight is an error frame naming the id.
  ASSERT_TRUE(c.send({{"type", "abort"}, {"id", 7}}));
  const std::optional<json> e = c.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  EXPECT_EQ((*e)["id"], 7);
}

TEST_F(TcpApi, BadFramesGetErrorFramesAndTheConnectionKeepsWorking) {
  TcpClient c(port_);
  struct Case {
    std::string bytes;
    json id;
    std::string says;
  };
  const std::vector<Case> cases = {
      {std::string("\0\0\0\x01\xc1", 5), nullptr, "malformed frame"},
      {std::string("\0\0\0\x02\x91\x01", 6), nullptr, "must be a msgpack map"},
      {wire::encode_frame({{"type", "launch"}, {"id", 3}}), 3, "unknown frame type"},
      {wire::encode_frame({{"type", "submit"}, {"id", 1.5}, {"prompt", "x"}}), nullptr, "'id'"},
      {wire::encode_frame({{"type", "submit"}, {"id", 4}}), 4, "'prompt' or 'tokens'"},
      {wire::encode_frame(submit(5, "hi", 4, {{"temperature", -1}})), 5, "temperature"},
      {wire::encode_frame(submit(6, "hi", 4, {{"max_tokens", 0}})), 6, "max_tokens"},
      {wire::encode_frame(submit(8, "hi", 4, {{"tokens", {1}}})), 8, "'prompt' or 'tokens'"},
  };
  for (const Case& k : cases) {
    ASSERT_TRUE(c.send_raw(k.bytes));
    const std::optional<json> m = c.read();
    ASSERT_TRUE(m) << k.says;
    EXPECT_EQ((*m)["type"], "error") << m->dump();
    EXPECT_EQ((*m)["id"], k.id) << m->dump();
    EXPECT_NE((*m)["message"].get<std::string>().find(k.says), std::string::npos) << m->dump();
  }
  ASSERT_TRUE(c.send(submit(9, "Once upon a time", 5)));
  std::map<std::string, Result> results = {{"9", {}}};
  read_until_done(c, results);
  EXPECT_EQ(results["9"].text, generate("Once upon a time", 5));
}

TEST_F(TcpApi, OversizedLengthClosesTheConnection) {
  TcpClient c(port_);
  ASSERT_TRUE(c.send_raw(std::string("\xff\xff\xff\xff", 4)));
  const std::optional<json> e = c.read();  // one error frame, then closed
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error") << e->dump();
  EXPECT_TRUE((*e)["id"].is_null()) << e->dump();
  EXPECT_NE((*e)["message"].get<std::string>().find("over the limit of 65536 bytes"), std::string::npos)
      << e->dump();
  EXPECT_FALSE(c.read());
  TcpClient next(port_);   // the server goes on
  ASSERT_TRUE(next.send(submit(1, "Once upon a time", 3)));
  std::map<std::string, Result> results = {{"1", {}}};
  read_until_done(next, results);
  EXPECT_EQ(results["1"].done["finish_reason"], "length");
}

// Requests finished as aborted so far, from /metrics.
double aborted_count(uint16_t http_port) {
  return prometheus_value(http(http_port, "GET", "/metrics").body,
                          "troupe:request_success_total{finished_reason=\"abort\"");
}

TEST_F(TcpApi, DisconnectAbortsTheConnectionsRequests) {
  const double before = aborted_count(http_port_);
  ASSERT_GE(before, 0);
  {
    TcpClient c(port_);
    ASSERT_TRUE(c.send(submit(1, "Once upon a time", 240)));
    ASSERT_TRUE(c.send(submit(2, "Tell me a story", 240)));
    ASSERT_TRUE(c.read());  // under way
  }
  // Both end as aborted (not after their 240 tokens), and nothing is left running.
  bool done = false;
  for (int i = 0; i < 400 && !done; ++i) {
    const std::string body = http(http_port_, "GET", "/metrics").body;
    done = aborted_count(http_port_) == before + 2 &&
           body.find("troupe:num_requests_running{model_name=\"v41-tiny-seed7\"} 0") != std::string::npos;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(done) << http(http_port_, "GET", "/metrics").body;
}

TEST(TcpDaemon, SigtermLetsTheRequestFinishAndExitsZero) {
  Daemon d({kModelDir, "--port", "0", "--tcp-port", "0"});
  const uint16_t http_port = d.port();
  ASSERT_TRUE(d.wait_ready(http_port)) << d.output();
  TcpClient c(tcp_port_of(d));
  ASSERT_TRUE(c.ok()) << d.output();
  ASSERT_TRUE(c.send(submit(1, "Once upon a time", 60)));
  ASSERT_TRUE(c.read());  // under way
  std::thread stopper([&] { EXPECT_EQ(d.stop(SIGTERM), 0) << d.output(); });
  std::map<std::string, Result> results = {{"1", {}}};
  read_until_done(c, results);
  stopper.join();
  EXPECT_EQ(results["1"].done["finish_reason"], "length");
  EXPECT_EQ(results["1"].done["usage"]["completion_tokens"], 60);
}

// A socket listening on 127.0.0.1 at a port the OS picks: the port is busy while it lives.
class BusyPort {
 public:
  BusyPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~BusyPort() {
    if (fd_ >= 0) close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int fd_;
  uint16_t port_ = 0;
};

// A busy --tcp-port stops startup like a busy --port: exit 2 and a message naming the
// flag and the port, before the model loads; nothing says "listening" (the HTTP API
// alone does not start).
TEST(TcpDaemon, BusyTcpPortStopsStartupNamingThePort) {
  const BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  const std::string port = std::to_string(busy.port());
  Daemon d({kModelDir, "--port", "0", "--tcp-port", port});
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(30)), 2) << d.output();
  const std::string out = d.output();
  EXPECT_NE(out.find("troupe serve: error: --tcp-port " + port + ": cannot listen on tcp 127.0.0.1:" + port),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  EXPECT_EQ(out.find("loading model"), std::string::npos) << out;
}

}  // namespace
}  // namespace troupe::testing
