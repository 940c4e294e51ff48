// TROUPE_CHECK: validation at op and API boundaries. A failed check throws
// troupe::Error carrying file:line and the caller's message, so bad external input
// becomes a clear error value at the edge instead of a crash deeper down.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace troupe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
[[noreturn]] void throw_check(const char* file, int line, const char* cond, const Args&... args) {
  std::ostringstream os;
  os << file << ':' << line << ": check failed: " << cond;
  if constexpr (sizeof...(Args) > 0) {
    os << ": ";
    (os << ... << args);
  }
  throw Error(os.str());
}
}  // namespace detail

}  // namespace troupe

#define TROUPE_CHECK(cond, ...)                                                   \
  do {                                                                            \
    if (!(cond)) ::troupe::detail::throw_check(__FILE__, __LINE__, #cond, ##__VA_ARGS__); \
  } while (0)

// Throws troupe::Error with a message built from the arguments (no file:line: for
// errors users read, such as a bad checkpoint or a bad flag).
#define TROUPE_FAIL(...)                                                         \
  do {                                                                            \
    std::ostringstream troupe_fail_os_;                                           \
    troupe_fail_os_ << __VA_ARGS__;                                               \
    throw ::troupe::Error(troupe_fail_os_.str());                                 \
  } while (0)
