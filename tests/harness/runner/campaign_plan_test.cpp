// Campaign plans and shards: `--per-cell` plans give every applicable
// kernel x property x dtype its cases (and top up cells whose cases were not
// all judged), and `--shard i/n` splits a campaign into disjoint shares that
// together are the whole, the regression replays included.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "harness/report/progress.h"
#include "harness/runner/campaign_result.h"
#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cli;

/// What a campaign checked: (kind, case, property, generated index or -1) of
/// every case record of its JSON lines.
using Checked = std::multiset<std::tuple<std::string, std::string, std::string, int64_t>>;

Checked checkedIn(const std::string& jsonl) {
  Checked out;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case" && j["type"] != "regression") continue;
    out.insert({j["type"], j["case"]["case"], j["property"], j.value("index", int64_t{-1})});
  }
  return out;
}

struct CampaignRun {
  CampaignResult result;
  Checked checked;
};

CampaignRun campaign(int shard_index, int shard_count, int64_t cases, int64_t per_cell, const std::string& name) {
  // Named after the test too: two tests of this file write "whole" and
  // "shard<i>", and under `ctest -j` they run at once (one had read the
  // other's half-written file: an empty "whole").
  const std::string path = ::testing::TempDir() + "plan_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name + ".jsonl";
  std::filesystem::remove(path);
  CampaignOptions o;
  o.op = "rmsnorm";
  o.kernels = {"host_separate", "host_atomic"};
  o.cases = cases;
  o.per_cell = per_cell;
  o.seed = 0x5a4d;
  o.tier = Tier::Smoke;
  o.shard_index = shard_index;
  o.shard_count = shard_count;
  o.save_failures = false;  // the regression corpus is replayed (and split), never written
  CampaignRun r;
  {
    JsonlWriter json(path);
    o.json = &json;
    ExecContext exec;
    exec.pool = &ThreadPool::shared();
    r.result = runCampaign(o, exec);
  }
  r.checked = checkedIn(path);
  return r;
}

/// The shards of one campaign: none checks what another does, and together
/// they check exactly what the unsharded campaign does (`keep` limits the
/// comparison to the records it accepts, by generated index).
void expectShardsPartition(int64_t cases, int64_t per_cell, const std::function<bool(int64_t index)>& keep) {
  const CampaignRun whole = campaign(0, 1, cases, per_cell, "whole");
  ASSERT_GT(whole.result.regression_cases, 3) << "the corpus has rmsnorm replays to split";
  Checked expected;
  for (const auto& c : whole.checked)
    if (keep(std::get<3>(c))) expected.insert(c);
  constexpr int kShards = 3;
  Checked together, everything;
  int64_t generated = 0;
  for (int s = 0; s < kShards; ++s) {
    const CampaignRun part = campaign(s, kShards, cases, per_cell, "shard" + std::to_string(s));
    EXPECT_EQ(part.result.planned_cases, whole.result.planned_cases) << "every shard makes the same plan";
    EXPECT_GT(part.result.cases_run, 0) << "shard " << s;
    generated += part.result.cases_run;
    for (const auto& c : part.checked) {
      EXPECT_EQ(everything.count(c), 0u) << "checked by two shards: " << std::get<1>(c) << " " << std::get<2>(c);
      everything.insert(c);
      // A case and property checked twice in one shard would be counted twice;
      // the multiset compares counts too.
      if (keep(std::get<3>(c))) together.insert(c);
    }
  }
  EXPECT_EQ(together, expected);
  EXPECT_GT(generated, 0);
}

TEST(CampaignShards, AreDisjointAndTogetherTheWholeCampaign) {
  expectShardsPartition(40, 0, [](int64_t) { return true; });
}

TEST(CampaignShards, ShareAPerCellPlanComputedFromTheSeedAlone) {
  // Past the plan, the whole campaign and each shard top up cells whose
  // cases were not all judged, each from its own cases: the plan's cases
  // are what the shards and the whole share exactly.
  constexpr int64_t kPerCell = 4;
  const CampaignRun whole = campaign(0, 1, 500, kPerCell, "plan");
  const int64_t planned = whole.result.planned_cases;
  ASSERT_GT(planned, 0);
  expectShardsPartition(500, kPerCell, [&](int64_t index) { return index < planned; });
}

TEST(CampaignPlan, GivesEveryApplicableCellItsJudgedCases) {
  constexpr int64_t kPerCell = 6;
  const CampaignRun r = campaign(0, 1, 2000, kPerCell, "target");
  ASSERT_TRUE(r.result.plan_reached_target);
  // Two kernels, three dtypes, the four properties that apply to rmsnorm.
  EXPECT_EQ(r.result.applicable_cells.size(), 2u * 3u * 4u);
  EXPECT_TRUE(r.result.belowTarget().empty()) << testing::explain(r.result);
  for (const auto& cell : r.result.applicable_cells)
    EXPECT_GE(r.result.cells.at(cell).judged(), kPerCell) << std::get<0>(cell) << " " << std::get<1>(cell);
  // The plan is the shortest prefix that reaches the target: far fewer than
  // the most allowed, and at least one case per cell's share.
  EXPECT_LT(r.result.planned_cases, 2000);
  EXPECT_GE(r.result.planned_cases, kPerCell * 6);  // 2 kernels x 3 dtypes, each case one of them
  // Every generated case checked lies in the plan or tops up a cell.
  for (const auto& c : r.checked)
    if (std::get<3>(c) >= r.result.planned_cases) {
      EXPECT_GT(r.result.topped_up_cases, 0);
    }
}

TEST(CampaignPlan, AnUnreachableTargetSaysWhichCellsFellShort) {
  // At most 5 cases cannot give 24 cells 6 judged cases each.
  const CampaignRun r = campaign(0, 1, 5, 6, "short");
  EXPECT_FALSE(r.result.plan_reached_target);
  EXPECT_EQ(r.result.planned_cases, 5);
  EXPECT_FALSE(r.result.belowTarget().empty());
  const std::string summary = formatJudgedSummary(r.result);
  EXPECT_NE(summary.find("BELOW TARGET"), std::string::npos) << summary;
}

TEST(CampaignPlan, AFailureShrunkOntoAnotherVariantDecidesTheOneItWasFoundOnToo) {
  // Seen on the H100: FlashInfer's CUDA Gemma fused add failed accuracy (a
  // flushed subnormal sum) and its case shrank onto the plain variant as the
  // weight offset shrank away. The campaign stops checking the variant a
  // failure was found on; counting only the shrunk one as decided, it topped
  // up 1,098 cases for a cell it no longer checked and ended BELOW TARGET.
  CampaignResult r;
  r.per_cell = 50;
  const CellKey found{"flashinfer_fused_add_rmsnorm_cuda_gemma", "accuracy", "bf16"};
  r.applicable_cells = {found, {"flashinfer_fused_add_rmsnorm_cuda_gemma", "determinism", "bf16"}};
  r.cells[{"flashinfer_fused_add_rmsnorm_cuda_gemma", "determinism", "bf16"}].passed = 50;
  FailureRecord f;
  f.property = "accuracy";
  f.original.kernel = "flashinfer_fused_add_rmsnorm_cuda_gemma";
  f.shrunk.kernel = "flashinfer_fused_add_rmsnorm_cuda";
  r.failures.push_back(f);
  EXPECT_TRUE(r.decidedByFailure().count({"flashinfer_fused_add_rmsnorm_cuda_gemma", "accuracy"}));
  EXPECT_TRUE(r.decidedByFailure().count({"flashinfer_fused_add_rmsnorm_cuda", "accuracy"}));
  for (const auto& [cell, judged] : r.belowTarget()) ADD_FAILURE() << std::get<0>(cell) << " " << std::get<1>(cell);
}

TEST(CampaignPlan, BadShardsAndCountsAreUsageErrors) {
  for (const char* bad : {"--shard 0/2", "--shard 3/2", "--shard 1", "--shard 1/0", "--shard a/b", "--shard 1/2x",
                          "--cases -4", "--cases lots", "--per-cell -1"}) {
    const auto r = cli(std::string("run --backend host --op rmsnorm ") + bad);
    EXPECT_EQ(r.code, exit_code::kUsage) << bad << "\n" << r.output;
  }
  const auto r = cli("run --backend host --op rmsnorm --shard 3/2");
  EXPECT_NE(r.output.find("--shard"), std::string::npos) << r.output;
}

TEST(CampaignPlan, TheCliPrintsThePlanTheShardAndTheTarget) {
  const auto r = cli(
      "run --backend host --op layernorm --tier smoke --per-cell 3 --seed 9 --no-save --no-corpus --shard "
      "2/2");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("plan: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shard 2/2"), std::string::npos) << r.output;
  const auto whole = cli("run --backend host --op layernorm --tier smoke --per-cell 3 --seed 9 --no-save --no-corpus");
  EXPECT_EQ(whole.code, exit_code::kOk) << whole.output;
  EXPECT_NE(whole.output.find("target met: each of the 12 kernel x property x dtype cells judged >= 3"),
            std::string::npos)
      << whole.output;
}

TEST(CampaignPlan, SaysHowManyOfItsCasesAreSkippedForADtypeTheirKernelDoesNotTake) {
  // test_rmsnorm_contiguous takes fp32 and bf16 only: the plan's fp16 cases
  // of it are never run, and the plan says how many, so that the generated
  // cases counted at the end add up.
  const auto r = cli(std::string("run --op rmsnorm --tier smoke --per-cell 3 --seed 9 --no-save --no-corpus --kernel "
                                 "host_separate --kernel test_rmsnorm_contiguous --plugin ") +
                     ULPCHECK_TEST_PLUGIN_GOOD);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  long planned = 0, skipped = 0, ran = 0;
  const size_t plan = r.output.find("plan: ");
  ASSERT_NE(plan, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + plan, "plan: %ld generated cases (%ld of them skipped", &planned, &skipped),
            2)
      << r.output;
  const size_t end = r.output.find(" generated cases + ");
  ASSERT_NE(end, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + r.output.rfind("# ", end), "# %ld", &ran), 1) << r.output;
  EXPECT_GT(skipped, 0) << r.output;
  EXPECT_EQ(ran + skipped, planned) << r.output;
}

TEST(CampaignProgressReport, TheBarSaysWhereTheRunIsAndWhenItEnds) {
  CampaignProgress p{25, 100, 1, 10.0, 0};
  EXPECT_DOUBLE_EQ(etaSeconds(p), 30.0);  // 25 cases in 10 s: 75 more in 30 s
  p.time_budget_s = 20;
  EXPECT_DOUBLE_EQ(etaSeconds(p), 10.0);                        // the time budget ends it sooner
  EXPECT_LT(etaSeconds(CampaignProgress{0, 100, 0, 0, 0}), 0);  // nothing known yet
  EXPECT_EQ(formatDuration(65), "1m05s");
  EXPECT_EQ(formatDuration(7), "7s");
  EXPECT_EQ(formatDuration(3700), "1h01m");
  const std::string bar = formatProgressBar("rmsnorm", CampaignProgress{50, 100, 0, 5.0, 0}, 120);
  EXPECT_NE(bar.find("rmsnorm ["), std::string::npos) << bar;
  EXPECT_NE(bar.find("50/100 cases, 0 failures, 5s, ETA 5s"), std::string::npos) << bar;
  EXPECT_LE(bar.size(), 120u) << bar;
  const std::string half = bar.substr(bar.find('[') + 1, bar.find(']') - bar.find('[') - 1);
  EXPECT_EQ(std::count(half.begin(), half.end(), '#'), std::count(half.begin(), half.end(), '.')) << bar;
  // Without room (plain log lines), no bar: the figures only.
  EXPECT_EQ(formatProgressBar("layernorm", CampaignProgress{1, 3, 2, 61.0, 0}, 0),
            "layernorm 1/3 cases, 2 failures, 1m01s, ETA 2m02s");
}

}  // namespace
}  // namespace ulpcheck
