// The message of the troupe::Error a callable throws, for tests that check what a bad
// input is told.
#pragma once

#include <string>

#include "kernels/check.h"

namespace troupe::test {

// The message of the troupe::Error that f throws ("" if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace troupe::test
