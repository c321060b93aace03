// `ulpcheck run --workers N` (on the GPU, --gpus: one worker per GPU): the
// coordinator's report of N worker processes is the report one process gives
// of the same campaign, and a worker that crashes ends alone, named, with
// what the others measured kept.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/ctest_gpus.h"
#include "harness/report/table.h"
#include "harness/runner/campaign_json.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/workers.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

using testing::cli;

struct Records {
  // Every case record as "kind index case property verdict" (not its
  // figures: host_atomic sums in arrival order, its bits vary run to run).
  std::multiset<std::string> cases;
  nlohmann::json summary;
};

Records read(const std::string& path) {
  Records r;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "summary") {
      r.summary = j;
      continue;
    }
    if (j["type"] != "case" && j["type"] != "regression") continue;
    r.cases.insert(fmt::format("{} {} {} {} {}", j["type"].get<std::string>(), j.value("index", int64_t{-1}),
                               j["case"]["case"].get<std::string>(), j["property"].get<std::string>(),
                               j["outcome"]["verdict"].get<std::string>()));
  }
  return r;
}

TEST(CampaignWorkers, TwoWorkersReportWhatOneProcessDoes) {
  const std::string one = ::testing::TempDir() + "workers1.jsonl", two = ::testing::TempDir() + "workers2.jsonl";
  const std::string args = "run --backend host --op rmsnorm --tier smoke --per-cell 5 --seed 0x3a --no-save --json ";
  const auto single = cli(args + one);
  ASSERT_EQ(single.code, exit_code::kOk) << single.output;
  const auto split = cli(args + two + " --workers 2");
  ASSERT_EQ(split.code, exit_code::kOk) << split.output;
  EXPECT_NE(split.output.find("2 workers"), std::string::npos) << split.output;
  EXPECT_NE(split.output.find("target met"), std::string::npos) << split.output;
  const Records a = read(one), b = read(two);
  ASSERT_FALSE(a.cases.empty());
  // Top-ups aside (each worker tops up its own share), the same cases were
  // checked with the same outcomes.
  std::multiset<std::string> planned_a, planned_b;
  const int64_t planned = a.summary.at("planned_cases");
  EXPECT_EQ(b.summary.at("planned_cases"), planned);
  for (const auto* side : {&a, &b})
    for (const auto& c : side->cases)
      if (std::stoll(c.substr(c.find(' ') + 1)) < planned) (side == &a ? planned_a : planned_b).insert(c);
  EXPECT_EQ(planned_a.size(), planned_b.size());
  for (const auto& c : planned_a) EXPECT_EQ(planned_b.count(c), planned_a.count(c)) << "one process: " << c;
  for (const auto& c : planned_b) EXPECT_EQ(planned_a.count(c), planned_b.count(c)) << "two workers: " << c;
  // The table's cells: the same counts of cases, failures and verdicts.
  std::map<std::string, nlohmann::json> cells_a, cells_b;
  for (const auto& c : a.summary.at("cells"))
    cells_a[c.at("kernel").get<std::string>() + c.at("property").get<std::string>() +
            c.at("dtype").get<std::string>()] = c;
  for (const auto& c : b.summary.at("cells"))
    cells_b[c.at("kernel").get<std::string>() + c.at("property").get<std::string>() +
            c.at("dtype").get<std::string>()] = c;
  ASSERT_EQ(cells_a.size(), cells_b.size());
  if (a.summary.at("topped_up_cases") == 0 && b.summary.at("topped_up_cases") == 0) {
    for (const auto& [key, c] : cells_a)
      for (const char* field : {"cases", "wrong", "expected", "inconclusive", "skipped", "judged"}) {
        EXPECT_EQ(c.at(field), cells_b.at(key).at(field)) << key << " " << field;
      }
  }
}

TEST(CampaignWorkers, EveryOpsResultsCrossFromWorkersIntact) {
  // allreduce_rmsnorm's cells (six properties, several tensors with error
  // distributions) once lost their distributions on the way (a loop over a
  // destroyed temporary); the coordinator must rebuild every worker's result.
  for (const char* op : {"allreduce_rmsnorm", "layernorm"}) {
    const auto r = cli(std::string("run --backend host --op ") + op +
                       " --tier smoke --per-cell 2 --seed 0x2a04 --no-save --no-corpus --workers 2");
    EXPECT_EQ(r.code, exit_code::kOk) << op << "\n" << r.output;
    EXPECT_NE(r.output.find("target met"), std::string::npos) << op << "\n" << r.output;
  }
}

TEST(CampaignWorkers, AWorkerThatCrashesEndsAloneAndIsNamed) {
  // In process, the plugin's segfault at N = 7 kills the worker that meets
  // it; with this seed the only N = 7 case is case 7, in the second worker's share.
  const auto r = cli(std::string("run --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD +
                     " --kernel test_rmsnorm_segfaults_at_n7 --in-process --workers 2 --tier smoke --cases 24 "
                     "--seed 1 --no-save --no-corpus --shrink-budget 1");
  EXPECT_EQ(r.code, exit_code::kRuntimeError) << r.output;
  EXPECT_NE(r.output.find("worker 2 ended without its result: killed by signal 11"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("worker 1 ended without"), std::string::npos) << r.output;
  // Worker 1's cases are in the table.
  EXPECT_NE(r.output.find("test_rmsnorm_segfaults_at_n7 accuracy"), std::string::npos) << r.output;
}

TEST(CampaignWorkers, BadWorkerCountsAreUsageErrors) {
  EXPECT_EQ(cli("run --backend host --op rmsnorm --workers -1").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --backend host --op rmsnorm --workers many").code, exit_code::kUsage);
  const auto r = cli("run --backend host --op rmsnorm --gpus 2");
  EXPECT_EQ(r.code, exit_code::kUsage) << r.output;
  EXPECT_NE(r.output.find("--gpus needs the cuda backend"), std::string::npos) << r.output;
}

TEST(CampaignWorkers, AResultSurvivesItsJsonRoundTrip) {
  CampaignResult r;
  r.cases_run = 7;
  r.regression_cases = 2;
  r.planned_cases = 9;
  r.per_cell = 3;
  r.cells[{"k", "accuracy", "bf16"}] = CellStats{5, 3, 1, 0, 0, 1, INFINITY, 2.5, 0.25};
  r.judged[{"k", "accuracy"}] = 4;
  r.applicable_cells.insert({"k", "accuracy", "bf16"});
  r.cell_targets[{"k", "accuracy", "bf16"}] = 2;
  r.paths["k"]["vector"] = 3;
  FailureRecord f;
  f.kind = "generated";
  f.property = "accuracy";
  f.original = parseCaseString("op=rmsnorm kernel=host_separate dtype=bf16 M=3 N=17");
  f.shrunk = parseCaseString("op=rmsnorm kernel=host_separate dtype=bf16 M=1 N=1");
  f.outcome.verdict = Verdict::Fail;
  f.outcome.summary = "1 elements over budget";
  f.outcome.findings.push_back({"dx", 0, 0, 0x1.8p0, 0x1p0, 0x1p0, 1e3, 0.5, 2e3, "note", "x=0x1p+0"});
  f.outcome.stats.push_back({"dx", 1, 1, 1e3, 1e3, 2e3, 1, 1});
  r.failures.push_back(f);
  const CampaignResult back = campaignResultFromJson(nlohmann::json::parse(campaignResultToJson(r).dump()));
  EXPECT_EQ(back.cases_run, 7);
  EXPECT_EQ(back.cells.at({"k", "accuracy", "bf16"}).inconclusive, 1);
  EXPECT_TRUE(std::isinf(back.cells.at({"k", "accuracy", "bf16"}).max_ulp));
  EXPECT_EQ(back.cell_targets.at({"k", "accuracy", "bf16"}), 2);
  ASSERT_EQ(back.failures.size(), 1u);
  EXPECT_EQ(toCaseString(back.failures[0].shrunk), toCaseString(f.shrunk));
  EXPECT_EQ(back.failures[0].outcome.findings.at(0).got, 0x1.8p0);
  EXPECT_EQ(formatFailure(back.failures[0]), formatFailure(f));
  CampaignResult sum;
  mergeCampaignResult(sum, back, "a");
  mergeCampaignResult(sum, back, "b");
  EXPECT_EQ(sum.cases_run, 14);
  EXPECT_EQ(sum.cells.at({"k", "accuracy", "bf16"}).failed, 2);
  EXPECT_EQ(sum.failures.size(), 2u);
  EXPECT_EQ(sum.cell_targets.at({"k", "accuracy", "bf16"}), 4);
}

TEST(CtestGpus, TheGpusCtestAllocatesBecomeTheVisibleOnes) {
  // As ctest sets them for RESOURCE_GROUPS "2,gpus:1" under a resource spec.
  setenv("CTEST_RESOURCE_GROUP_COUNT", "2", 1);
  setenv("CTEST_RESOURCE_GROUP_0", "gpus", 1);
  setenv("CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:1", 1);
  setenv("CTEST_RESOURCE_GROUP_1", "gpus", 1);
  setenv("CTEST_RESOURCE_GROUP_1_GPUS", "id:1,slots:1", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
  useCtestAllocatedGpus();
  ASSERT_NE(std::getenv("CUDA_VISIBLE_DEVICES"), nullptr);
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "3,1");
  EXPECT_EQ(workers::visibleGpus(2), (std::vector<std::string>{"3", "1"}));
  for (const char* v : {"CTEST_RESOURCE_GROUP_COUNT", "CTEST_RESOURCE_GROUP_0", "CTEST_RESOURCE_GROUP_0_GPUS",
                        "CTEST_RESOURCE_GROUP_1", "CTEST_RESOURCE_GROUP_1_GPUS", "CUDA_VISIBLE_DEVICES"})
    unsetenv(v);
  useCtestAllocatedGpus();  // outside ctest's allocation: nothing changes
  EXPECT_EQ(std::getenv("CUDA_VISIBLE_DEVICES"), nullptr);
  EXPECT_EQ(workers::visibleGpus(2), (std::vector<std::string>{"0", "1"}));
}

TEST(CampaignWorkers, OptionsAreDroppedInEitherSpelling) {
  const std::vector<std::string> args{"run", "--seed", "7", "--gpus=2", "--op", "rmsnorm", "--json", "x.jsonl"};
  EXPECT_EQ(workers::withoutOptions(args, {"--seed", "--gpus", "--json"}),
            (std::vector<std::string>{"run", "--op", "rmsnorm"}));
}

}  // namespace
}  // namespace ulpcheck
