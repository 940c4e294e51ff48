// The fault-injection spec: what parses, what is refused (naming the item), and when
// each fault fires as steps and tokenizations are counted.
#include "runtime/faults/fault_plan.h"

#include <gtest/gtest.h>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

TEST(FaultPlan, ParsesEveryKind) {
  const FaultPlan p = FaultPlan::parse(
      "step-throw@3,rank-exit@7,step-stall@2:250,tokenize-fail@1,rank-start-stall@2:900");
  ASSERT_EQ(p.faults().size(), 5u);
  EXPECT_EQ(p.faults()[0].kind, FaultKind::StepThrow);
  EXPECT_EQ(p.faults()[0].at, 3);
  EXPECT_EQ(p.faults()[1].kind, FaultKind::RankExit);
  EXPECT_EQ(p.faults()[1].at, 7);
  EXPECT_EQ(p.faults()[2].kind, FaultKind::StepStall);
  EXPECT_EQ(p.faults()[2].at, 2);
  EXPECT_EQ(p.faults()[2].stall_ms, 250);
  EXPECT_EQ(p.faults()[3].kind, FaultKind::TokenizeFail);
  EXPECT_EQ(p.faults()[4].kind, FaultKind::RankStartStall);
  EXPECT_EQ(p.faults()[4].at, 2);
  EXPECT_EQ(p.faults()[4].stall_ms, 900);
  EXPECT_TRUE(FaultPlan::parse("").empty());
}

TEST(FaultPlan, CountsKvImportsApartFromSteps) {
  const FaultPlan p = FaultPlan::parse("kv-import-drop@2,kv-import-stall@3:40,step-throw@1");
  EXPECT_TRUE(p.next_step().fail);
  const FaultPlan::ImportFault first = p.next_import();
  EXPECT_FALSE(first.drop);
  EXPECT_EQ(first.stall_ms, 0);
  EXPECT_TRUE(p.next_import().drop);
  const FaultPlan::ImportFault third = p.next_import();
  EXPECT_FALSE(third.drop);
  EXPECT_EQ(third.stall_ms, 40);
  EXPECT_FALSE(p.next_import().drop);
}

TEST(FaultPlan, CountsKvCommitsApartFromImports) {
  const FaultPlan p = FaultPlan::parse("kv-commit-drop@2,kv-import-drop@1");
  EXPECT_TRUE(p.next_import().drop);
  EXPECT_FALSE(p.next_commit());
  EXPECT_TRUE(p.next_commit());
  EXPECT_FALSE(p.next_commit());
}

TEST(FaultPlan, CountsKvPutsApartFromCommits) {
  const FaultPlan p = FaultPlan::parse("kv-put-hang@2,kv-commit-drop@1");
  EXPECT_TRUE(p.next_commit());
  EXPECT_FALSE(p.next_put());
  EXPECT_TRUE(p.next_put());
  EXPECT_FALSE(p.next_put());
}

TEST(FaultPlan, RefusesBadSpecsNamingTheItem) {
  const std::pair<const char*, const char*> cases[] = {
      {"step-throw", "'step-throw'"},        {"step-throw@", "N must be"},
      {"step-throw@0", "N must be"},         {"step-throw@-1", "N must be"},
      {"step-throw@1x", "N must be"},        {"explode@1", "unknown kind 'explode'"},
      {"step-stall@1", "needs :MS"},         {"step-stall@1:0", "needs :MS"},
      {"step-throw@1:5", "only the stalls"}, {"step-throw@1,,rank-exit@2", "empty item"},
      {"rank-start-stall@2", "rank-start-stall needs :MS"},
      {"kv-import-stall@1", "kv-import-stall needs :MS"}, {"kv-import-drop@1:5", "only the stalls"},
      {"step-throw@1,", "empty item"},       {"step-throw@99999999999999999999", "N must be"},
  };
  for (const auto& [spec, needle] : cases) {
    try {
      FaultPlan::parse(spec);
      ADD_FAILURE() << spec << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << spec << ": " << e.what();
    }
  }
}

TEST(FaultPlan, FiresAtTheCountedStepOnce) {
  const FaultPlan p = FaultPlan::parse("step-throw@2,step-stall@3:40,rank-exit@3,step-stall@3:2");
  const StepFault s1 = p.next_step(), s2 = p.next_step(), s3 = p.next_step(), s4 = p.next_step();
  EXPECT_FALSE(s1.fail || s1.exit || s1.stall_ms);
  EXPECT_TRUE(s2.fail);
  EXPECT_FALSE(s2.exit);
  EXPECT_TRUE(s3.exit);
  EXPECT_FALSE(s3.fail);
  EXPECT_EQ(s3.stall_ms, 42);  // both stalls of step 3
  EXPECT_FALSE(s4.fail || s4.exit || s4.stall_ms);
}

TEST(FaultPlan, CountsTokenizationsApartFromSteps) {
  const FaultPlan p = FaultPlan::parse("tokenize-fail@2,step-throw@1");
  EXPECT_FALSE(p.next_tokenize());
  EXPECT_TRUE(p.next_step().fail);
  EXPECT_TRUE(p.next_tokenize());
  EXPECT_FALSE(p.next_tokenize());
  const FaultPlan none;
  EXPECT_FALSE(none.next_tokenize());
  EXPECT_FALSE(none.next_step().fail);
}

TEST(FaultPlan, CountsRankStartsApartFromSteps) {
  const FaultPlan p = FaultPlan::parse("rank-start-stall@2:300,step-stall@1:5");
  EXPECT_EQ(p.next_rank_start(), 0);  // the first rank
  EXPECT_EQ(p.next_step().stall_ms, 5);
  EXPECT_EQ(p.next_rank_start(), 300);  // the first restart
  EXPECT_EQ(p.next_rank_start(), 0);
}

}  // namespace
}  // namespace troupe::runtime
