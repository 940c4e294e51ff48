// `troupe bench ucx` end to end: it starts its second rank itself, names the UCX transport
// and prints one row per shape whose bytes per step are what the shape implies (T kE / 2
// rows each way: an int32 slot + H elements to dispatch, H elements to combine, both ways);
// bad flags exit 2 naming the flag. Figures are not checked (never pass/fail on timing).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

#ifdef TROUPE_HAVE_UCX

std::vector<std::string> fields_of_row(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::vector<std::string> f;
    for (std::string x; in >> x;) f.push_back(x);
    if (!f.empty() && f[0] == name) return f;
  }
  return {};
}

TEST(BenchUcxCli, NamesTheTransportAndMovesTheBytesEachShapeImplies) {
  const RunResult r =
      run_troupe("bench ucx --steps 2 --warmup 1 --sync-steps 5 --sync-warmup 1 --kv-put-repeats 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("UCX transports: rank 1: "), std::string::npos) << r.out;
  struct Shape {
    const char* name;
    long long tokens, top_k, hidden, elem;
  };
  for (const Shape& s : {Shape{"tiny", 32, 6, 256, 4}, Shape{"flash-bf16", 256, 6, 5120, 2},
                         Shape{"flash-f32", 256, 6, 5120, 4}}) {
    const auto f = fields_of_row(r.out, s.name);
    ASSERT_GE(f.size(), 6u) << s.name << "\n" << r.out;
    const long long rows = s.tokens * s.top_k / 2;
    const long long bytes = 2 * (rows * (4 + s.hidden * s.elem) + rows * s.hidden * s.elem);
    EXPECT_EQ(f[5], std::to_string(bytes)) << s.name << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("UCX, two processes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in-process, two threads"), std::string::npos) << r.out;
  // The KV region puts: one row per size (the receiver checked the last one's bytes, or
  // the bench would have failed).
  EXPECT_NE(r.out.find("KV hand-off region, one UCX RMA put"), std::string::npos) << r.out;
  for (const char* bytes : {"81920", "901120", "8388608", "67108864"})
    EXPECT_FALSE(fields_of_row(r.out, bytes).empty()) << bytes << "\n" << r.out;
}

TEST(BenchUcxCli, BadFlagsExit2NamingThem) {
  expect_usage_errors({{"--steps 0", "--steps"},
                       {"--sync-steps 0", "--sync-steps"},
                       {"--kv-put-repeats 0", "--kv-put-repeats"},
                       {"--rank 1", "--rank 1 --dir DIR"},
                       {"extra", "flags only"}},
                      "bench ucx ");
}

#else

TEST(BenchUcxCli, SaysTheBuildHasNoUcx) {
  const RunResult r = run_troupe("bench ucx");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("without UCX"), std::string::npos) << r.out;
}

#endif

}  // namespace
}  // namespace troupe::testing
