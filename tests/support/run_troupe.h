// Runs the troupe binary (TROUPE_BINARY) with a command line and collects its exit
// status and combined stdout + stderr, for end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

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

}  // namespace troupe::testing
