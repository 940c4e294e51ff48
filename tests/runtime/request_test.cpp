// Request: one token buffer (prompt then output) seen through spans, the counts the
// scheduler reads, and the status -> finish_reason table of the OpenAI API.
#include "runtime/request.h"

#include <gtest/gtest.h>

#include <vector>

namespace troupe::runtime {
namespace {

using Ids = std::vector<int32_t>;

TEST(Request, PromptAndOutputShareOneBuffer) {
  RequestParams p;
  p.sampling.seed = 42;
  Request r(3, Ids{5, 6, 7}, p, 9);
  EXPECT_EQ(r.id, 3);
  EXPECT_EQ(r.arrival, 9u);
  EXPECT_EQ(r.params.sampling.seed, 42u);
  EXPECT_EQ(r.status, RequestStatus::Waiting);
  EXPECT_EQ(r.num_tokens(), 3);
  EXPECT_EQ(r.num_output_tokens(), 0);
  EXPECT_TRUE(r.output().empty());
  r.tokens.push_back(8);
  r.tokens.push_back(9);
  EXPECT_EQ(Ids(r.prompt().begin(), r.prompt().end()), (Ids{5, 6, 7}));
  EXPECT_EQ(Ids(r.output().begin(), r.output().end()), (Ids{8, 9}));
  EXPECT_EQ(r.prompt().data() + 3, r.output().data());  // one buffer, no copies
  r.num_computed_tokens = 4;
  EXPECT_EQ(r.num_uncomputed(), 1);  // a decode
}

TEST(Request, StatusTable) {
  struct Case {
    RequestStatus s;
    bool finished;
    std::string_view name, reason;
  };
  const std::vector<Case> cases = {
      {RequestStatus::Waiting, false, "waiting", ""},
      {RequestStatus::Running, false, "running", ""},
      {RequestStatus::Preempted, false, "preempted", ""},
      {RequestStatus::FinishedStopped, true, "finished_stopped", "stop"},
      {RequestStatus::FinishedLength, true, "finished_length", "length"},
      {RequestStatus::FinishedAborted, true, "finished_aborted", "abort"},
      {RequestStatus::FinishedError, true, "finished_error", "error"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(is_finished(c.s), c.finished) << c.name;
    EXPECT_EQ(to_string(c.s), c.name);
    EXPECT_EQ(finish_reason(c.s), c.reason) << c.name;
  }
}

}  // namespace
}  // namespace troupe::runtime
