// The tests' /metrics reader (tests/support/prometheus_text.h): whole names, label
// prefixes, names that only start alike, and absent series.
#include <gtest/gtest.h>

#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

const char* const kText =
    "# HELP troupe:x_total a counter\n"
    "# TYPE troupe:x_total counter\n"
    "troupe:x_total 7\n"
    "troupe:x 3.5\n"
    "troupe:done_total{finished_reason=\"length\",model=\"m\"} 2\n"
    "troupe:done_total{finished_reason=\"abort\",model=\"m\"} 1\n";

TEST(PrometheusText, ReadsTheSampleNamedExactly) {
  EXPECT_EQ(prometheus_value(kText, "troupe:x_total"), 7.0);
  EXPECT_EQ(prometheus_value(kText, "troupe:x"), 3.5);  // not troupe:x_total's line
}

TEST(PrometheusText, ALabelPrefixPicksTheSeries) {
  EXPECT_EQ(prometheus_value(kText, "troupe:done_total"), 2.0);  // the first series
  EXPECT_EQ(prometheus_value(kText, "troupe:done_total{finished_reason=\"abort\""), 1.0);
}

TEST(PrometheusText, AbsentSeriesIsMinusOne) {
  EXPECT_EQ(prometheus_value(kText, "troupe:y"), -1.0);
  EXPECT_EQ(prometheus_value(kText, "troupe:x_"), -1.0);
  EXPECT_EQ(prometheus_value("", "troupe:x"), -1.0);
}

}  // namespace
}  // namespace troupe::testing
