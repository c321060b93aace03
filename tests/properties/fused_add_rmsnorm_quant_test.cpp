// fused_add_rmsnorm_quant (fused add + RMSNorm + FP8 output): the host port
// passes on every spec (residual_out exact, each fp8 value one the oracle
// admits); a row whose residual_out overflowed has NaN as its only y_q
// there; the fusion's mutant (the norm of residual_out where the spec reads
// the fp32 sum) fails accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/case_spec.h"
#include "harness/runner/run_case.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "properties/op.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

const std::string kBase = "op=fused_add_rmsnorm_quant M=5 N=200 ld=208 eps=0x1.0c6f7ap-20 mean=0x0p+0 dy_sigma=0x1p+0";

TEST(FusedAddRmsNormQuant, EveryValueTheHostPortStoresIsAdmittedOnEverySpec) {
  const char* overflows[] = {"satfinite", "nonfinite"};
  const char* inverses[] = {"exact", "approx", "divide"};
  int cases = 0;
  for (const char* dtype : {"bf16", "fp16", "fp32"})
    for (const char* sum : {"rounded", "fp32"})
      for (const bool fp32_residual : {false, true})
        for (const char* quant : {"static", "token", "group128", "group64"})
          for (const char* format : {"e4m3", "e5m2"}) {
            // The other fields in turn, so each value meets every dtype.
            const std::string spec = fmt::format("sum={} quant={} fp8={} overflow={} inverse={}{}{}", sum, quant,
                                                 format, overflows[cases % 2], inverses[cases % 3],
                                                 fp32_residual ? " res=fp32" : "",
                                                 cases % 4 == 1 ? fmt::format(" scaled={}", dtype) : "");
            const CaseSpec c = parseCaseString(
                fmt::format("{} kernel=host_fused_add_rmsnorm_quant dtype={} dist={} sigma=0x1p+{} seed={:#x} {}",
                            kBase, dtype, cases % 5 == 0 ? "near_overflow" : "normal", cases % 3, cases, spec));
            int judged_by = 0;
            for (const ReplayResult& r : runCase(c, {}, testing::hostContext())) {
              judged_by += r.applies && r.outcome.judged();
              EXPECT_EQ(r.outcome.verdict, Verdict::Pass) << toCaseString(c) << "\n"
                                                          << r.property << ": " << r.outcome.summary;
            }
            EXPECT_EQ(judged_by, 4) << toCaseString(c) << ": accuracy, batch invariance, determinism, memory safety";
            ++cases;
          }
  EXPECT_EQ(cases, 96);
}

TEST(FusedAddRmsNormQuant, WhereResidualOutOverflowedTheOnlyValueAdmittedIsNaN) {
  // x = -0x1.514p+14, residual = -0x1.bfp+15: residual_out = -inf in fp16, so
  // rstd = 0 and y[0,0] = -inf * 0 = NaN in the spec; the row's other y are 0.
  for (const char* quant : {"static", "token"}) {
    const CaseSpec c = parseCaseString(fmt::format(
        "op=fused_add_rmsnorm_quant kernel=host_fused_add_rmsnorm_quant dtype=fp16 M=1 N=3 ld=3 eps=0x1.0c6f7ap-20 "
        "dist=near_overflow sigma=0x1p+0 mean=0x0p+0 dy_sigma=0x1p+0 seed=0x0 quant={}",
        quant));
    const std::vector<ReferenceTensor> ref = findOp("fused_add_rmsnorm_quant")->reference(c, testing::hostContext());
    ASSERT_EQ(ref.size(), std::string(quant) == "token" ? 3u : 2u);
    const ReferenceTensor& residual_out = ref.at(0);
    const ReferenceTensor& y = ref.at(1);
    ASSERT_TRUE(std::isinf(residual_out.exact[0])) << "the case's residual_out overflows at [0, 0]";
    EXPECT_TRUE(std::isnan(y.exact[0]));
    EXPECT_TRUE(y.admissible.admits(DType::E4M3, 0, NAN));
    EXPECT_FALSE(y.admissible.admits(DType::E4M3, 0, 448.0)) << "a finite value where the spec's is NaN";
    EXPECT_FALSE(y.admissible.admits(DType::E4M3, 0, 0.0));
    for (size_t i = 1; i < 3; ++i) EXPECT_TRUE(y.admissible.admits(DType::E4M3, i, 0.0)) << i;
    if (std::string(quant) == "token") {
      // The row's other y are 0: amax 0 and the scale its floor, or NaN (torch.amax).
      const ReferenceTensor& scale = ref.at(2);
      EXPECT_TRUE(scale.admissible.admits(DType::F32, 0, double(minTokenScale(Fp8Format::E4M3FN))));
      EXPECT_TRUE(scale.admissible.admits(DType::F32, 0, NAN));
      EXPECT_TRUE(y.admissible.admits(DType::E4M3, 1, NAN)) << "a NaN scale makes the row NaN";
    }
    for (const ReplayResult& r : runCase(c, {}, testing::hostContext()))
      EXPECT_EQ(r.outcome.verdict, Verdict::Pass) << quant << " " << r.property << ": " << r.outcome.summary;
  }
}

TEST(FusedAddRmsNormQuant, TheNormOfTheRoundedSumFailsWhereTheSpecReadsTheFp32Sum) {
  const std::string c = "op=fused_add_rmsnorm_quant dtype=fp16 M=1 N=3 ld=3 eps=0x1.0c6f7ap-20 dist=normal "
                        "sigma=0x1p+0 mean=0x0p+0 dy_sigma=0x1p+0 seed=0x0 sum=fp32 quant=token";
  const auto accuracy = [&](const std::string& kernel) {
    return runCase(parseCaseString(c + " kernel=" + kernel), {"accuracy"}, testing::hostContext()).at(0).outcome;
  };
  EXPECT_EQ(accuracy("host_fused_add_rmsnorm_quant").verdict, Verdict::Pass);
  const Outcome bug = accuracy("host_bug_quant_of_rounded_sum");
  EXPECT_EQ(bug.verdict, Verdict::Fail);
  EXPECT_NE(bug.summary.find("outside the values the spec admits"), std::string::npos) << bug.summary;
}

}  // namespace
}  // namespace ulpcheck
