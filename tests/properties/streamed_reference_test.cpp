// A case whose reference would not fit in memory held whole is judged on a
// streamed one (oracles/reference.h, ReferenceRows): the per-row tensors
// of LayerNorm, RMSNorm and the fused ops (y, dx, residual_out, dresidual)
// made again, a block of rows at a time, when the judge reads them. It must
// judge exactly as the held reference does: the same JSON lines, case for
// case, failures, shrinking and findings included. $ULPCHECK_MAX_HELD_REFERENCE=0
// streams every case, so small campaigns cover the specs the large ones have.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

using testing::cli;
using testing::Result;

/// A record without its times (which differ between any two runs).
nlohmann::json withoutTimes(nlohmann::json j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [key, value] : j.items())
      if (key != "seconds" && key != "seconds_to_detect") out[key] = withoutTimes(value);
    return out;
  }
  if (j.is_array())
    for (auto& value : j) value = withoutTimes(value);
  return j;
}

std::vector<nlohmann::json> records(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(withoutTimes(nlohmann::json::parse(line)));
  return out;
}

/// `args` (a run) with every reference held whole, then streamed: the same
/// exit code and JSON lines; only the streamed run says it streamed.
void expectStreamedJudgesAsHeld(const std::string& args, int expected_code) {
  // Named after the test: ctest runs the tests of a suite side by side.
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string held = ::testing::TempDir() + name + ".held.jsonl",
                    streamed = ::testing::TempDir() + name + ".streamed.jsonl";
  setenv("ULPCHECK_MAX_HELD_REFERENCE", "1T", 1);
  const Result a = cli(args + " --json " + held);
  setenv("ULPCHECK_MAX_HELD_REFERENCE", "0", 1);
  const Result b = cli(args + " --json " + streamed);
  unsetenv("ULPCHECK_MAX_HELD_REFERENCE");
  EXPECT_EQ(a.code, expected_code) << args << "\n" << a.output;
  EXPECT_EQ(b.code, expected_code) << args << "\n" << b.output;
  EXPECT_EQ(a.output.find("of them streamed"), std::string::npos) << a.output;
  EXPECT_NE(b.output.find("of them streamed"), std::string::npos) << b.output;
  const std::vector<nlohmann::json> whole = records(held), rows = records(streamed);
  ASSERT_GT(whole.size(), 10u) << a.output;
  ASSERT_EQ(whole.size(), rows.size()) << args;
  for (size_t k = 0; k < whole.size(); ++k)
    EXPECT_EQ(whole[k], rows[k]) << args << "\nrecord " << k << " held:\n"
                                 << whole[k].dump() << "\nstreamed:\n"
                                 << rows[k].dump();
}

TEST(StreamedReference, AHostCampaignIsJudgedAsWithItsReferenceHeldWhole) {
  // The correct host LayerNorm and two mutants it must fail and shrink
  // (the variance of masked lanes, the one-pass variance), every spec the
  // generator draws (stats=T on the MPFR path among them), on the fast
  // oracle and on MPFR alone.
  expectStreamedJudgesAsHeld(
      "run --backend host --op layernorm --kernel host_twopass host_bug_masked_lane_variance "
      "host_bug_one_pass_variance --property accuracy --cases 90 --seed 0x5157 --no-save --no-corpus",
      exit_code::kPropertyFailed);
  expectStreamedJudgesAsHeld(
      "run --backend host --op layernorm --kernel host_twopass --cases 30 --seed 0x77 --oracle mpfr --no-save "
      "--no-corpus",
      exit_code::kOk);
}

TEST(StreamedReference, AnRmsNormCampaignIsJudgedAsWithItsReferenceHeldWhole) {
  // RMSNorm's y and dx streamed as LayerNorm's: the correct host kernel and
  // mutants of the forward (rstd saved in bf16; Llama's unrounded x-hat:
  // rows of the fast path's Llama rounding points) and of the backward (a
  // bf16 row sum), every spec the generator draws (Llama, stats=T, a bias,
  // an offset), on the fast oracle and on MPFR alone.
  expectStreamedJudgesAsHeld(
      "run --backend host --op rmsnorm --kernel host_separate host_bug_rstd_bf16 host_bug_llama_xhat_unrounded "
      "host_bug_bf16_rowsum --property accuracy --cases 90 --seed 0x5158 --no-save --no-corpus",
      exit_code::kPropertyFailed);
  expectStreamedJudgesAsHeld(
      "run --backend host --op rmsnorm --kernel host_separate --cases 30 --seed 0x78 --oracle mpfr --no-save "
      "--no-corpus",
      exit_code::kOk);
}

TEST(StreamedReference, TheFusedOpsAreJudgedAsWithTheirReferencesHeldWhole) {
  // Fused add + RMSNorm (residual_out and y streamed; its backward's dx and
  // dresidual, the norm of the residual_out the forward kept) and allreduce
  // + RMSNorm at several ranks, with a mutant of each the accuracy check
  // must still catch, every spec the generators draw (sum=fp32 and res=fp32
  // among them), on the fast oracle and on MPFR alone.
  expectStreamedJudgesAsHeld(
      "run --backend host --op fused_add_rmsnorm --kernel host_fused_add host_bug_residual_grad_through_norm "
      "--property accuracy --cases 60 --seed 0x515a --no-save --no-corpus",
      exit_code::kPropertyFailed);
  expectStreamedJudgesAsHeld(
      "run --backend host --op allreduce_rmsnorm --kernel host_fused_oneshot host_fused_twostage "
      "host_bug_no_round_trip --property accuracy --cases 60 --seed 0x515b --no-save --no-corpus",
      exit_code::kPropertyFailed);
  for (const char* op : {"fused_add_rmsnorm", "allreduce_rmsnorm"})
    expectStreamedJudgesAsHeld(
        std::string("run --backend host --op ") + op + " --cases 20 --seed 0x79 --oracle mpfr --no-save --no-corpus",
        exit_code::kOk);
}

TEST(StreamedReference, ABlackBoxsProbabilisticBudgetsAreStreamedWithItsRows) {
  // PyTorch's CPU LayerNorm and RMSNorm, black boxes: on normal data each element also
  // has its probabilistic budget, the oracle at the effective depths
  // (RowsWithStatisticalBudgets makes both for each block).
  ULPCHECK_REQUIRE_PYTHON_WITH_TORCH();
  expectStreamedJudgesAsHeld(std::string("run --backend host --kernel torch_layer_norm_cpu --dtype fp32 --property "
                                         "accuracy --cases 60 --seed 0x99 --no-save --no-corpus --python ") +
                                 ULPCHECK_SOURCE_DIR + "/python/ulpcheck/adapters/torch_ops.py",
                             exit_code::kOk);
  // And its RMSNorm.
  expectStreamedJudgesAsHeld(std::string("run --backend host --kernel torch_rms_norm_cpu --dtype fp32 --property "
                                         "accuracy --cases 40 --seed 0x9a --no-save --no-corpus --python ") +
                                 ULPCHECK_SOURCE_DIR + "/python/ulpcheck/adapters/torch_ops.py",
                             exit_code::kOk);
}

}  // namespace
}  // namespace ulpcheck
