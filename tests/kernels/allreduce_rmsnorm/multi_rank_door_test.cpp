// The multi-rank door on the host (kernels/allreduce_rmsnorm/
// allreduce_rmsnorm_door.cpp): a plugin's or Python variant of allreduce +
// residual + RMSNorm runs each virtual rank in a worker process of its own,
// the ranks meeting through ulpcheck's shared communication buffers (the C
// ABI) or a torch.distributed gloo group (the Python door); every property
// judges it, a defect of one rank is caught, and a rank that dies or hangs
// fails the case on every rank while the campaign goes on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

using testing::cli;
using testing::Result;

const std::string kExample = std::string(" --plugin ") + ULPCHECK_EXAMPLE_PLUGIN;
const std::string kTorchOps = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                              "/python/ulpcheck/adapters/torch_ops.py";
const std::string kRankKernels = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/rank_kernels.py";

/// The rank counts of a campaign's cases (its JSON lines).
std::set<int> ranksIn(const std::string& json) {
  std::set<int> ranks;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r["type"] == "case") ranks.insert(std::stoi(r["case"].value("ranks", std::string("1"))));
  }
  return ranks;
}

TEST(MultiRankDoor, AHostPluginPassesEveryPropertyWithOneProcessPerRank) {
  const std::string json = ::testing::TempDir() + "multi-rank-plugin.jsonl";
  const Result r = cli("run --op allreduce_rmsnorm --kernel mylib_allreduce_rmsnorm_host --per-cell 12 --seed 5 "
                       "--no-save --no-corpus --json " +
                       json + kExample);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_EQ(ranksIn(json), (std::set<int>{1, 2, 3, 4, 8})) << r.output;
  testing::expectEachPassedMoreThan(
      json, {"accuracy", "rank_consistency", "determinism", "batch_invariance", "memory_safety"}, 0, r.output);
}

TEST(MultiRankDoor, ARankSummingFromItsOwnPartialIsCaughtByRankConsistencyAndReplays) {
  // vLLM #51290's class: the ranks' sums in different orders. fp32 sums of
  // three or more partials are inexact often: the ranks disagree.
  const Result r = cli("run --op allreduce_rmsnorm --kernel mylib_allreduce_rmsnorm_host_rank_relative_order "
                       "--property rank_consistency --dtype fp32 --per-cell 20 --seed 5 --no-save --no-corpus" +
                       kExample);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("residual_out@"), std::string::npos) << r.output;
  testing::expectReproFailsAgain(r.output, "rank_consistency");
}

class MultiRankPythonDoor : public ::testing::Test {
 protected:
  void SetUp() override { ULPCHECK_REQUIRE_PYTHON_WITH_TORCH(); }
};

TEST_F(MultiRankPythonDoor, TorchDistributedOnGlooPassesEveryProperty) {
  const std::string json = ::testing::TempDir() + "multi-rank-gloo.jsonl";
  const Result r = cli("run --op allreduce_rmsnorm --kernel torch_allreduce_rms_norm_cpu --per-cell 8 --seed 3 "
                       "--tier smoke --no-save --no-corpus --json " +
                       json + kTorchOps);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_GT(ranksIn(json).size(), 3u) << r.output;
  testing::expectEachPassedMoreThan(json, {"accuracy", "rank_consistency", "determinism", "memory_safety"}, 0,
                                    r.output);
}

TEST_F(MultiRankPythonDoor, ARankWhoseResultDiffersIsCaughtByRankConsistency) {
  const Result r = cli("run --op allreduce_rmsnorm --kernel py_allreduce_rank1_adds_its_partial_twice --property "
                       "rank_consistency --per-cell 6 --tier smoke --seed 3 --no-save --no-corpus" +
                       kRankKernels);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("residual_out@1"), std::string::npos) << r.output;
}

TEST_F(MultiRankPythonDoor, ASumRoundedAfterEachRankPassesUnderItsDeclaredSpecOnlyFromThreeRanksOn) {
  // FlashInfer's fp32_acc=False, declared allreduce_acc="activation": every
  // property passes at 3 and 4 ranks; the same kernel held to one rounding
  // of the exact sum (the default spec) fails accuracy.
  const std::string json = ::testing::TempDir() + "multi-rank-acc.jsonl";
  const Result declared = cli("run --op allreduce_rmsnorm --kernel py_allreduce_sum_in_x_dtype --per-cell 4 --seed 3 "
                              "--tier smoke --no-save --no-corpus --json " +
                              json + kRankKernels);
  EXPECT_EQ(declared.code, exit_code::kOk) << declared.output;
  EXPECT_EQ(ranksIn(json), (std::set<int>{3, 4})) << declared.output;
  {  // Its cases carry the spec it declared: acc=<its dtype>.
    std::ifstream in(json);
    int64_t cases = 0;
    for (std::string line; std::getline(in, line);) {
      const auto rec = nlohmann::json::parse(line);
      if (rec["type"] != "case") continue;
      ++cases;
      const std::string text = rec["case"]["case"];
      EXPECT_NE(text.find("acc=" + rec["case"]["dtype"].get<std::string>()), std::string::npos) << text;
    }
    EXPECT_GT(cases, 0);
  }
  testing::expectEachPassedMoreThan(json, {"accuracy", "rank_consistency", "determinism", "memory_safety"}, 0,
                                    declared.output);
  const Result undeclared = cli("run --op allreduce_rmsnorm --kernel py_allreduce_sum_in_x_dtype_undeclared --property "
                                "accuracy --per-cell 8 --seed 3 --tier smoke --no-save --no-corpus" +
                                kRankKernels);
  EXPECT_EQ(undeclared.code, exit_code::kPropertyFailed) << undeclared.output;
  EXPECT_NE(undeclared.output.find("residual_out["), std::string::npos) << undeclared.output;
}

TEST_F(MultiRankPythonDoor, ARankThatDiesOrHangsFailsTheCaseOnEveryRankAndTheCampaignGoesOn) {
  // Rank 1 ends mid-call (its peer is left in all_reduce, waiting for it):
  // the case fails at once, naming the rank, and every rank restarts.
  testing::expectFaultIsolated(ULPCHECK_EXAMPLE_PLUGIN, "py_allreduce_rank1_dies_at_n7", testing::atN(7), "rank 1 of 2",
                               "--op allreduce_rmsnorm --tier smoke" + kRankKernels);
  // Rank 1 never returns, and rank 0 waits in all_reduce for it: a hang of
  // both after --case-timeout (exit code 5).
  const Result hang = cli("repro 'op=allreduce_rmsnorm kernel=py_allreduce_rank1_hangs_at_n5 dtype=fp32 M=4 N=5 "
                          "ranks=2' --property accuracy --case-timeout 5" +
                          kRankKernels);
  EXPECT_EQ(hang.code, exit_code::kHang) << hang.output;
  EXPECT_NE(hang.output.find("did not return within 5 s (a hang?) on ranks 0, 1 of 2"), std::string::npos)
      << hang.output;
}

}  // namespace
}  // namespace ulpcheck
