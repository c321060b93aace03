// Cases checked at once (CampaignOptions::concurrent_cases, --concurrent-cases)
// give the results of one case at a time: the same checks, verdicts, failures
// and shrunk cases, including the checks a failure makes moot, which cases
// running beside the failing one have already made and the commit drops.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case_spec.h"
#include "harness/runner/run_case.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cli;

TEST(CampaignConcurrency, CasesCheckedAtOnceGiveTheResultsOfOneAtATime) {
  // Two correct variants (one nondeterministic by contract) and two mutants
  // that fail early (accuracy, batch invariance), so that the cases running
  // beside the first failure check what the commit must then drop.
  CampaignOptions o = testing::hermeticCampaign(
      {"host_separate", "host_atomic", "host_bug_drop_tail", "host_bug_threads_from_m"}, 80, 0xc0c0, Tier::Smoke);
  // Ample: both runs must shrink to the end to shrink alike. Its shrinks take
  // under a second here; 5 s was exhausted at different steps under
  // AddressSanitizer beside a CI run (2 cores), giving two shrunk cases.
  o.shrink_budget_s = 300;
  const auto [one, many] = testing::expectSameResultsAtOnce(o, testing::hostContext(), 4);
  EXPECT_EQ(one.cases_run, 80);
  std::set<std::pair<std::string, std::string>> failed;
  for (const FailureRecord& f : one.failures) failed.insert({f.shrunk.kernel, f.property});
  EXPECT_TRUE(failed.count({"host_bug_drop_tail", "accuracy"})) << testing::explain(one);
  EXPECT_TRUE(failed.count({"host_bug_threads_from_m", "batch_invariance"})) << testing::explain(one);
  for (const FailureRecord& f : one.failures) EXPECT_GT(f.shrink_steps, 0) << f.property << " " << f.shrunk.kernel;
}

/// (generated index, property) -> verdict and summary of every case record of
/// a JSON-lines file.
std::map<std::pair<int64_t, std::string>, std::string> checksIn(const std::string& jsonl) {
  std::map<std::pair<int64_t, std::string>, std::string> out;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case") continue;
    out[{j["index"].get<int64_t>(), j["property"].get<std::string>()}] =
        j["outcome"]["verdict"].get<std::string>() + ": " + j["outcome"]["summary"].get<std::string>();
  }
  return out;
}

TEST(CampaignConcurrency, APluginsCasesRunAloneBesideTheCasesRunningAtOnce) {
  // A plugin's variants (run in a worker process) wait for the built-in
  // variant's cases running at once, and those wait for them: the same
  // checks as one case at a time, the plugin's defect included.
  std::map<std::pair<int64_t, std::string>, std::string> checks[2];
  for (int n : {1, 3}) {
    const std::string json = ::testing::TempDir() + "at_once_plugin_" + std::to_string(n) + ".jsonl";
    const auto r = cli("run --op rmsnorm --kernel host_separate --kernel mylib_rmsnorm_host --kernel "
                       "mylib_rmsnorm_host_bf16_dw --tier smoke --cases 40 --seed 0x33 --no-save --no-corpus "
                       "--shrink-budget 5 --plugin " ULPCHECK_EXAMPLE_PLUGIN " --concurrent-cases " +
                       std::to_string(n) + " --json " + json);
    EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
    EXPECT_NE(r.output.find("FAIL accuracy"), std::string::npos) << r.output;
    checks[n > 1] = checksIn(json);
  }
  EXPECT_GT(checks[0].size(), 80u);
  EXPECT_EQ(checks[0], checks[1]);
}

TEST(CampaignConcurrency, TheCliSaysHowManyCasesRunAtOnceAndRejectsBadCounts) {
  const auto at_once = cli("run --op rmsnorm --backend host --tier smoke --cases 12 --seed 0x31 --no-save --no-corpus "
                           "--concurrent-cases 3");
  EXPECT_EQ(at_once.code, 0) << at_once.output;
  EXPECT_NE(at_once.output.find("| 3 cases at once |"), std::string::npos) << at_once.output;
  EXPECT_NE(at_once.output.find("summed over the 3 cases checked at once"), std::string::npos) << at_once.output;
  for (const char* bad : {"0", "-2", "many", "257"}) {
    const auto r = cli(std::string("run --op rmsnorm --backend host --cases 2 --no-save --concurrent-cases ") + bad);
    EXPECT_EQ(r.code, exit_code::kUsage) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--concurrent-cases"), std::string::npos) << bad << ": " << r.output;
  }
}

/// Whether CaseGate admits a case beside others, from its case string.
bool runsAlone(const std::string& text) {
  const CaseSpec c = parseCaseString(text);
  const OpAdapter& op = *findOp(c.op);
  return CaseGate::runsAlone(kernelOf(c), c, op.peakHostBytes(c, testing::hostContext()));
}

TEST(CaseGate, PaddedRowsShareTheMachineMuchWorkOrMemoryRunsAlone) {
  const std::string base = "op=rmsnorm kernel=host_separate dtype=fp32 eps=0x1p-20 dist=normal sigma=0x1p+0 ";
  // The default tier's 65537 x 3 rows padded to ld = 67: 4.4 M elements of
  // buffers, 0.2 M of work, and an estimate under the shared bound.
  EXPECT_FALSE(runsAlone(base + "M=65537 N=3 ld=67"));
  EXPECT_FALSE(runsAlone(base + "M=2048 N=2048 ld=2048"));  // 2^22: the most work shared
  EXPECT_TRUE(runsAlone(base + "M=2049 N=2048 ld=2048"));   // a row more
  EXPECT_TRUE(runsAlone(base + "M=4096 N=4096 ld=4096"));
  // Little work, much memory: 2^20 rows of 1 column padded to 300 (fp32):
  // 1.2 GiB of each buffer estimated.
  EXPECT_TRUE(runsAlone(base + "M=1048576 N=1 ld=300"));
  // A one-row case of 2^22 columns: the work bound holds, the column sums'
  // memory (453 bytes a column estimated, 1.8 GiB) does not.
  EXPECT_TRUE(runsAlone(base + "M=1 N=4194304 ld=4194304"));
}

}  // namespace
}  // namespace ulpcheck
