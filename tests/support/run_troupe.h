// Runs the troupe binary (TROUPE_BINARY) with a command line and collects its exit
// status and combined stdout + stderr, for end-to-end CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>
#include "support/test_paths.h"

namespace troupe::testing {

struct RunResult {
  int status;       // exit code
  std::string out;  // stdout and stderr together
};

inline RunResult run_troupe(const std::string& args) {
  const std::string cmd = std::string(TROUPE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

// A command line the CLI must refuse: exit status 2 and `needle` (the flag, or the
// message naming it) in the output.
struct UsageError {
  std::string args, needle;
};

// Runs `prefix + args` of each case and checks both.
inline void expect_usage_errors(const std::vector<UsageError>& cases, const std::string& prefix = "") {
  for (const UsageError& c : cases) {
    const RunResult r = run_troupe(prefix + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace troupe::testing
