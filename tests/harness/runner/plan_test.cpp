// The plan stage on a made-up sequence of cases: which cases a per-cell plan
// takes, its cell targets and its shards' shares, with no kernel registered
// (this suite links the plan stage alone).
#include <gtest/gtest.h>

#include <stdexcept>

#include "harness/runner/plan.h"

namespace ulpcheck {
namespace {

const CellKey kA{"k", "accuracy", "fp32"};
const CellKey kB{"k", "determinism", "fp32"};

// Case 1 does not fit its kernel; every other case checks A, and cases
// divisible by 3 check B too.
std::optional<std::vector<CellKey>> madeUpCells(int64_t i) {
  if (i == 1) return std::nullopt;
  if (i % 3 == 0) return std::vector<CellKey>{kA, kB};
  return std::vector<CellKey>{kA};
}

TEST(PlanStage, WithoutPerCellTakesExactlyTheCasesAsked) {
  int64_t asked = 0;
  const Plan plan = makePlan(PlanRequest{25, 0, 0, 1}, {kA, kB}, [&](int64_t i) {
    ++asked;
    return madeUpCells(i);
  });
  EXPECT_EQ(plan.planned, 25);
  EXPECT_EQ(asked, 0) << "a plan of a fixed count needs no case drawn";
  EXPECT_TRUE(plan.reached_target);
  EXPECT_TRUE(plan.cell_targets.empty());
  EXPECT_EQ(plan.mineCount(), 25);
}

TEST(PlanStage, PerCellTakesTheShortestPrefixThatFillsEveryCell) {
  // per_cell 2: case 0 gives A1 B1, case 1 does not fit, case 2 A2, case 3 A3 B2: filled after 4 cases.
  const Plan plan = makePlan(PlanRequest{100, 2, 0, 1}, {kA, kB}, madeUpCells);
  EXPECT_EQ(plan.planned, 4);
  EXPECT_EQ(plan.unfit, 1);
  EXPECT_TRUE(plan.reached_target);
  EXPECT_EQ(plan.cell_targets.at(kA), 2);
  EXPECT_EQ(plan.cell_targets.at(kB), 2);
}

TEST(PlanStage, ShardsShareEachCellsTargetInProportionToTheirCases) {
  // Shard 1/2 runs cases 0 and 2 (A twice, B once), shard 2/2 case 3 (A, B).
  const Plan first = makePlan(PlanRequest{100, 2, 0, 2}, {kA, kB}, madeUpCells);
  const Plan second = makePlan(PlanRequest{100, 2, 1, 2}, {kA, kB}, madeUpCells);
  EXPECT_EQ(first.planned, second.planned) << "every shard computes the same plan";
  EXPECT_EQ(first.mineCount(), 2);
  EXPECT_EQ(second.mineCount(), 2);
  EXPECT_TRUE(first.mine(0) && first.mine(2) && !first.mine(3));
  EXPECT_TRUE(second.mine(1) && second.mine(3) && !second.mine(2));
  // A: 3 cases, 2 of them shard 1's: ceil(2 * 2 / 3) = 2 and ceil(1 * 2 / 3) = 1.
  EXPECT_EQ(first.cell_targets.at(kA), 2);
  EXPECT_EQ(second.cell_targets.at(kA), 1);
  // B: 2 cases, one each: ceil(1 * 2 / 2) = 1 each.
  EXPECT_EQ(first.cell_targets.at(kB), 1);
  EXPECT_EQ(second.cell_targets.at(kB), 1);
}

TEST(PlanStage, ACapTooSmallForTheTargetIsSaid) {
  const Plan plan = makePlan(PlanRequest{10, 50, 0, 1}, {kA, kB}, madeUpCells);
  EXPECT_EQ(plan.planned, 10);
  EXPECT_FALSE(plan.reached_target);
  EXPECT_EQ(plan.cell_targets.at(kA), 9) << "a cell's target is at most the cases it has";
  EXPECT_EQ(plan.cell_targets.at(kB), 4);
}

TEST(PlanStage, NothingApplicablePlansNothing) {
  const Plan plan = makePlan(PlanRequest{10, 5, 0, 1}, {}, madeUpCells);
  EXPECT_EQ(plan.planned, 0);
  EXPECT_TRUE(plan.reached_target);
}

TEST(PlanStage, AShardThatDoesNotExistIsRefused) {
  EXPECT_THROW(makePlan(PlanRequest{10, 0, 2, 2}, {kA}, madeUpCells), std::invalid_argument);
  EXPECT_THROW(makePlan(PlanRequest{10, 0, 0, 0}, {kA}, madeUpCells), std::invalid_argument);
  EXPECT_THROW(makePlan(PlanRequest{10, 0, -1, 2}, {kA}, madeUpCells), std::invalid_argument);
}

}  // namespace
}  // namespace ulpcheck
