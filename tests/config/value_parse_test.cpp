// Scalar parsers of the config loader: tables of accepted texts with hand-worked values
// and of texts that must be refused (partial parses, overflow, unknown units).
#include "config/value_parse.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace troupe::config {
namespace {

template <class T>
struct Case {
  std::string text;
  std::optional<T> want;
};

TEST(ConfigValueParse, Int) {
  const std::vector<Case<int64_t>> cases = {
      {"0", 0},
      {"-5", -5},
      {"+7", 7},
      {"8000", 8000},
      {"9223372036854775807", INT64_MAX},
      {"9223372036854775808", {}},
      {"", {}},
      {"1.0", {}},
      {" 1", {}},
      {"1 ", {}},
      {"0x10", {}},
      {"1e3", {}},
      {"1_000", {}},
      {"12abc", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_int(c.text), c.want) << "'" << c.text << "'";
}

TEST(ConfigValueParse, Bool) {
  const std::vector<Case<bool>> cases = {
      {"true", true},   {"True", true},   {"YES", true}, {"on", true},   {"1", true},
      {"false", false}, {"FALSE", false}, {"no", false}, {"Off", false}, {"0", false},
      {"", {}},         {"2", {}},        {"maybe", {}}, {"t", {}},      {" true", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_bool(c.text), c.want) << "'" << c.text << "'";
}

TEST(ConfigValueParse, Bytes) {
  const int64_t Ki = 1024, Mi = Ki * Ki, Gi = Mi * Ki, Ti = Gi * Ki;
  const std::vector<Case<int64_t>> cases = {
      {"0", 0},
      {"1073741824", Gi},
      {"2GiB", 2 * Gi},
      {"1.5 GiB", Gi + Gi / 2},
      {"512MB", 512'000'000},
      {"1kib", 1024},
      {"3B", 3},
      {"0.5KiB", 512},
      {"0.3KB", 300},  // exact: 3/10 * 1000, no floating point rounding
      {"9TiB", 9 * Ti},
      {"7 TB", 7'000'000'000'000},
      {" 64MiB ", 64 * Mi},
      {"8388607TiB", 8388607 * Ti},  // just below 2^63
      {"8388608TiB", {}},            // 2^63: overflows int64
      {"99999999999999999999", {}},
      {"1.1B", {}},       // not whole bytes
      {"1.0001KiB", {}},  // 1024.1024 bytes
      {"-1", {}},
      {"-1GiB", {}},
      {"", {}},
      {"GiB", {}},
      {"1.", {}},
      {".5KiB", {}},
      {"1..2KB", {}},
      {"1.2.3", {}},
      {"2EiB", {}},
      {"2G", {}},  // a bare G is ambiguous (10^9 or 2^30): refused
      {"2 GiB extra", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_bytes(c.text), c.want) << "'" << c.text << "'";
}

TEST(ConfigValueParse, Seconds) {
  const std::vector<Case<double>> cases = {
      {"30", 30},   {"2.5", 2.5},    {"0", 0},    {"500ms", 0.5}, {"30s", 30}, {"5m", 300},
      {"1h", 3600}, {"1.5 h", 5400}, {"-1", {}},  {"1d", {}},     {"", {}},    {"inf", {}},
      {"nan", {}},  {"s", {}},       {"1e3", {}}, {"3 sec", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_seconds(c.text), c.want) << "'" << c.text << "'";
}

TEST(ConfigValueParse, FormatBytesPicksTheLargestExactUnitAndReadsBack) {
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {0, "0"},
      {1, "1"},
      {1023, "1023"},
      {1024, "1KiB"},
      {1536, "1536"},  // 1.5 KiB: no whole unit, plain bytes
      {int64_t(64) << 20, "64MiB"},
      {int64_t(1) << 30, "1GiB"},
      {int64_t(3) << 40, "3TiB"},
      {int64_t(1) << 50, "1024TiB"},
      {12345678, "12345678"},
  };
  for (const auto& [bytes, text] : cases) {
    EXPECT_EQ(format_bytes(bytes), text);
    EXPECT_EQ(parse_bytes(format_bytes(bytes)), bytes);
  }
}

TEST(ConfigValueParse, FormatSecondsReadsBack) {
  for (double s : {0.0, 1.0, 2.5, 0.1, 1e-3, 1e-20, 1e300, 86400.0, 1.0 / 3}) {
    EXPECT_EQ(parse_seconds(format_seconds(s)), s) << format_seconds(s);
  }
  EXPECT_EQ(format_seconds(30), "30");
}

}  // namespace
}  // namespace troupe::config
