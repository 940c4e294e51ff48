// Replays every file of fuzz/corpus/<target>/ and fuzz/regressions/<target>/ through the
// fuzz entry of that target (fuzz/targets.h), compiled with the normal toolchain: a
// crash the fuzzers once found stays fixed even where no clang/libFuzzer build runs.
// An entry throws or crashes only on a finding (fuzz/fuzz_support.h), so each file must
// come back without an exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/targets.h"
#include "support/test_paths.h"

namespace troupe::fuzz {

// Test names and failure messages show the target's name, not its bytes.
void PrintTo(const Target& t, std::ostream* os) {
  *os << t.name;
}

namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(TROUPE_TEST_DATA) / ".." / ".." / "fuzz";

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void replay(const Target& t, const std::vector<fs::path>& files) {
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = read_bytes(f);
    EXPECT_NO_THROW(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

class FuzzRegressions : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzRegressions, EveryCorpusSeedIsHandled) {
  const auto seeds = files_in(kFuzzDir / "corpus" / std::string(GetParam().name));
  ASSERT_GE(seeds.size(), 3u) << "the corpus of a target holds a few seeds at least";
  replay(GetParam(), seeds);
}

TEST_P(FuzzRegressions, EveryRegressionInputIsHandled) {
  replay(GetParam(), files_in(kFuzzDir / "regressions" / std::string(GetParam().name)));
}

INSTANTIATE_TEST_SUITE_P(FuzzTargets, FuzzRegressions, ::testing::ValuesIn(kTargets),
                         [](const auto& info) { return std::string(info.param.name); });

// The entries do reject what their contract says must be rejected quietly, and let
// anything else through: a target that swallowed every exception would find nothing.
TEST(FuzzEntries, MalformedInputsOfEachTargetAreRejectedWithoutAnException) {
  for (const Target& t : kTargets) {
    SCOPED_TRACE(std::string(t.name));
    for (const std::string& bytes :
         {std::string(), std::string("\0\xff{[", 4), std::string(1000, '[')}) {
      EXPECT_NO_THROW(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    }
  }
}

}  // namespace
}  // namespace troupe::fuzz
