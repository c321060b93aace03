// Every property on the host port of the CUDA kernels, and the kill matrix of
// the host mutants: each killed by the property it names (so no property is a
// check that cannot fail).
#include <gtest/gtest.h>

#include <set>

#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::correctKernels;
using testing::explain;
using testing::hostContext;
using testing::replayCorpus;
using testing::runQuietly;

TEST(HostPort, EveryCorrectVariantPassesEveryPropertyOnSmokeCases) {
  const auto kernels = correctKernels(Backend::Host);
  EXPECT_GE(kernels.size(), 7u) << "rmsnorm's three dW strategies, layernorm, allreduce_rmsnorm's three pipelines";
  for (const auto& k : kernels) {
    const CampaignResult r = runQuietly(k, 200, 0x5eed, Tier::Smoke, hostContext());
    testing::expectPassedAndJudged(r, k, 100);
    EXPECT_EQ(r.cases_run, 200);
    EXPECT_EQ(r.cells.size(), r.judged.size() * 3u) << k << ": every property that applies x every dtype was exercised";
  }
}

TEST(HostPort, EveryCorrectVariantPassesEveryPropertyOnDefaultTierCases) {
  for (const auto& k : correctKernels(Backend::Host)) {
    const CampaignResult r = runQuietly(k, 15, 0xdefa17, Tier::Default, hostContext());
    testing::expectPassedAndJudged(r, k, 7);
  }
}

TEST(HostPort, PropertiesRunWhereTheyApply) {
  // fused_vs_unfused to fused variants, rank_consistency to multi-rank ops:
  // one rule for running, tables and exit codes.
  auto applies = [](const std::string& kernel, const std::string& property) {
    const CampaignResult r = runQuietly(kernel, 2, 0xa99, Tier::Smoke, hostContext());
    return r.judged.count({kernel, property}) > 0;
  };
  EXPECT_FALSE(applies("host_separate", "fused_vs_unfused"));
  EXPECT_FALSE(applies("host_separate", "rank_consistency"));
  EXPECT_FALSE(applies("host_unfused", "fused_vs_unfused"));
  EXPECT_TRUE(applies("host_fused_oneshot", "fused_vs_unfused"));
  EXPECT_TRUE(applies("host_unfused", "rank_consistency"));
  EXPECT_TRUE(applies("host_twopass", "batch_invariance"));
}

int64_t expectedVerdicts(const CampaignResult& r) {
  int64_t n = 0;
  for (const auto& [key, cell] : r.cells) n += cell.expected;
  return n;
}

TEST(HostPort, AtomicVariantsNondeterminismIsObservedAndExpected) {
  const CampaignResult r = runQuietly("host_atomic", 100, 0xa70, Tier::Smoke, hostContext(), {"determinism"});
  EXPECT_TRUE(r.failures.empty()) << explain(r);
  EXPECT_GT(expectedVerdicts(r), 10) << "arrival-order dW must differ between runs\n" << explain(r);
}

TEST(HostPort, RegressionCorpusOfEveryOpReplaysOnEveryCorrectVariant) {
  std::set<std::string> ops;
  for (const auto& kernel : correctKernels(Backend::Host)) {
    const CampaignResult r = replayCorpus(kernel, hostContext());
    EXPECT_GT(r.regression_cases, 0) << kernel << ": corpora/<op>/**/regression holds cases";
    EXPECT_TRUE(r.failures.empty()) << kernel << "\n" << explain(r);
    ops.insert(testing::opOf(kernel));
  }
  EXPECT_EQ(ops.size(), opRegistry().size()) << "every op's corpus replays on the CPU";
}

TEST(HostPort, CodePathsOfTheCasesAreCounted) {
  const CampaignResult r = runQuietly("host_separate", 40, 0xc0de, Tier::Default, hostContext(), {"memory_safety"});
  ASSERT_TRUE(r.paths.count("host_separate"));
  const auto& paths = r.paths.at("host_separate");
  int64_t loads = 0;
  for (const char* p : {"scalar", "vector", "vector+tail"}) loads += paths.at(p);
  EXPECT_EQ(loads, r.cases_run) << "every case takes exactly one of the load paths";
  EXPECT_EQ(paths.at("one row per CTA") + paths.at("several rows per CTA"), r.cases_run);
}

TEST(HostMutants, KillMatrixKillsEachByItsDeclaredPropertyAndShrinks) {
  const KillMatrix m = testing::ciKillMatrix(Backend::Host, hostContext());
  EXPECT_GE(m.rows.size(), 12u);
  testing::expectEveryMutantKilledAndShrunk(m);
}

}  // namespace
}  // namespace ulpcheck
