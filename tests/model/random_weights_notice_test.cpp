// Commands on the built-in tiny model say once on stderr that its weights are random;
// with --model they say nothing of the kind.
#include <gtest/gtest.h>

#include <string>

#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(RandomWeightsNotice, BuiltInModelSaysSoOnce) {
  const RunResult r = run_troupe("generate --prompt hi --max-tokens 2 2>&1 1>/dev/null | cat");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "weights are random"), 1) << r.out;  // on stderr (stdout discarded)
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
}

TEST(RandomWeightsNotice, AModelGivenIsNotCalledRandom) {
  const RunResult r = run_troupe("logits --model " + golden_dir() + " --tokens 1,2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "weights are random"), 0) << r.out;
}

}  // namespace
}  // namespace troupe::testing
