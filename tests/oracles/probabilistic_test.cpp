// The statistical check of black-box kernels (oracles/probabilistic.h): it
// catches a systematic error the rigorous worst-case budget admits, and
// correct kernels judged as black boxes never trip it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/datagen.h"
#include "kernels/plugin/plugin_loader.h"
#include "oracles/layernorm.h"
#include "oracles/rmsnorm.h"
#include "properties/accuracy.h"
#include "properties/layernorm_inputs.h"
#include "properties/rmsnorm_inputs.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::hostContext;

DescribeInputs noInputs() {
  return [](const std::string&, int64_t, int64_t) { return std::string(); };
}

/// The references a black box gets for case c (worst-case depths N and M),
/// with or without the statistical budgets, declaring two-pass statistics or not.
std::vector<ReferenceTensor> blackBoxReference(const CaseSpec& c, bool statistical, bool two_pass = false) {
  KernelInfo info;
  info.black_box = statistical;
  const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
  const AccuracyContract contract{DType::F32, blackBoxDepths(0, 0, shape, two_pass)};
  if (c.op == "rmsnorm") {
    const RmsNormInputData in = generateRmsNormInputs(c, identityRows(c.M));
    return referenceWithStatisticalBudgets(c, info, contract, [&](const AccuracyContract& at) {
      RmsNormReference r = rmsnormReference(RmsNormInputs{in.x, in.w, in.dy, c.eps}, at, ThreadPool::shared(),
                                            OracleMode::Fast);
      return std::vector<ReferenceTensor>{r.y, r.rstd, r.dx, r.dw};
    });
  }
  const LayerNormInputData in = generateLayerNormInputs(c, identityRows(c.M));
  return referenceWithStatisticalBudgets(c, info, contract, [&](const AccuracyContract& at) {
    LayerNormReference r = layernormReference(LayerNormInputs{in.x, in.gamma, in.beta, in.dy, c.eps}, at,
                                              ThreadPool::shared(), OracleMode::Fast);
    return std::vector<ReferenceTensor>{r.y, r.mean, r.rstd, r.dx, r.dgamma, r.dbeta};
  });
}

Outcome judgeAsBlackBox(const std::string& text, bool statistical, bool two_pass = false) {
  const CaseSpec c = parseCaseString(text);
  const RunResult run = findOp(c.op)->run(c, identityRows(c.M), hostContext());
  return judgeAccuracy(run, blackBoxReference(c, statistical, two_pass), noInputs());
}

double powerOf(const Outcome& o, const std::string& tensor) {
  for (const TensorStats& s : o.stats)
    if (s.tensor == tensor) return s.power();
  ADD_FAILURE() << "no tensor " << tensor;
  return 0;
}

TEST(Probabilistic, EffectiveDepthsGrowAsTheSquareRoot) {
  const double u = 0x1p-24;
  const ReductionDepths rigorous{4096, 65536};
  const double l = probabilistic::lambda(1e8, rigorous, u);
  // 2 E (D_row + D_col + 32) exp(-lambda^2 / 2) = 1e-6 at E = 1e8.
  EXPECT_GT(l, 8.0);
  EXPECT_LT(l, 10.0);
  const ReductionDepths d = probabilistic::effectiveDepths(rigorous, 1e8, u);
  EXPECT_NEAR(double(d.row), l * 64.0, 2.0);
  EXPECT_NEAR(double(d.col), l * 256.0, 2.0);
  // Short sums keep their rigorous depth: lambda sqrt(D) >= D there.
  EXPECT_EQ(probabilistic::effectiveDepth(40, l, u), 40);
  EXPECT_EQ(probabilistic::effectiveDepth(1, l, u), 1);
}

TEST(Probabilistic, ApplyOnlyWhereTheModelHolds) {
  EXPECT_TRUE(statisticalModelHolds(parseCaseString("op=rmsnorm kernel=host_separate dtype=fp32 M=4 N=64")));
  EXPECT_TRUE(
      statisticalModelHolds(parseCaseString("op=rmsnorm kernel=host_separate dtype=fp32 M=4 N=64 dist=zero_rows")));
  for (const char* not_random :
       {"op=rmsnorm kernel=host_separate dtype=fp32 M=4 N=64 dist=constant_rows",
        "op=layernorm kernel=host_twopass dtype=fp32 M=4 N=64 dist=large_mean mean=0x1p10 sigma=0x1p2",
        "op=rmsnorm kernel=host_separate dtype=fp32 M=4 N=64 dist=outlier_channels",
        "op=rmsnorm kernel=host_separate dtype=fp32 M=4 N=64 dist=subnormal"})
    EXPECT_FALSE(statisticalModelHolds(parseCaseString(not_random))) << not_random;
}

TEST(Probabilistic, PartialsSummedInBf16AreCaughtWhereTheWorstCaseBudgetAdmitsThem) {
  // M = 32768 narrow rows: the dW partials of 4224 CTAs summed in bf16 (the
  // large-M path of Liger-Kernel PR #950). As a black box (column depth M)
  // the worst-case budget admits it; the probabilistic one does not.
  const char* text = "op=rmsnorm kernel=host_bug_large_m_bf16_dw dtype=fp32 M=32768 N=2";
  const Outcome rigorous = judgeAsBlackBox(text, false);
  for (const TensorStats& s : rigorous.stats)
    if (s.tensor == "dw") {
      EXPECT_EQ(s.wrong, 0) << "the worst-case budget admits bf16 partials: " << rigorous.summary;
    }
  const Outcome statistical = judgeAsBlackBox(text, true);
  EXPECT_EQ(statistical.verdict, Verdict::Fail) << statistical.summary;
  EXPECT_NE(statistical.summary.find("probabilistic"), std::string::npos) << statistical.summary;
}

TEST(Probabilistic, ABlackBoxDeclaringTwoPassStatisticsIsJudgedWithoutTheRunningMeansAllowance) {
  // Rows of 1024 and 256 of them: the running-means allowance (Welford,
  // Chan's merges) widens the variance's budget so far that dgamma's could
  // not see an error of 1/64 of its value; a black box that declares its
  // statistics two-pass (Liger's LayerNorm) is held to the sharp one.
  const char* text = "op=layernorm kernel=host_twopass dtype=fp32 M=256 N=1024 seed=0x3";
  const Outcome running = judgeAsBlackBox(text, true, false);
  const Outcome two_pass = judgeAsBlackBox(text, true, true);
  EXPECT_EQ(running.verdict, Verdict::Inconclusive) << running.summary;
  EXPECT_LT(powerOf(running, "dgamma"), 0.5);
  EXPECT_EQ(two_pass.verdict, Verdict::Pass) << two_pass.summary;
  EXPECT_GT(powerOf(two_pass, "dgamma"), 0.9);
  EXPECT_GT(powerOf(two_pass, "dx"), powerOf(running, "dx"));
}

TEST(Probabilistic, CorrectKernelsJudgedAsBlackBoxesNeverTripIt) {
  // The host ports of ulpcheck's kernels (fp32 accumulation, tree and serial
  // sums) judged as black boxes on data the model fits, across shapes and
  // dtypes, including the large-M dW that the worst-case budget cannot judge.
  int judged = 0;
  double worst = 0, worst_fp32 = 0;  // 16-bit outputs sit up to half an ulp (their final rounding) from exact
  for (const char* op_kernel :
       {"op=rmsnorm kernel=host_separate", "op=rmsnorm kernel=host_lastblock", "op=layernorm kernel=host_twopass"})
    for (const char* dtype : {"fp32", "bf16", "fp16"})
      for (const char* shape : {"M=1 N=4096", "M=3 N=1000", "M=64 N=257", "M=2048 N=8", "M=32768 N=2"})
        for (const char* dist : {"", " dist=zero_rows", " dist=signed_zeros"})
          for (const char* seed : {" seed=0x1", " seed=0x2"}) {
            const std::string text = fmt::format("{} dtype={} {}{}{}", op_kernel, dtype, shape, dist, seed);
            const bool two_pass = std::string(op_kernel) == "op=layernorm kernel=host_twopass";
            const Outcome o = judgeAsBlackBox(text, true, two_pass);
            EXPECT_NE(o.verdict, Verdict::Fail) << text << "\n" << o.summary;
            judged += o.verdict == Verdict::Pass;
            for (const TensorStats& s : o.stats) {
              worst = std::max(worst, s.max_ratio);
              if (std::string(dtype) == "fp32") worst_fp32 = std::max(worst_fp32, s.max_ratio);
            }
          }
  EXPECT_GT(judged, 150) << "most of these cases must be judged with power";
  EXPECT_LT(worst, 1.0);
  std::printf(
      "correct kernels as black boxes: %d cases judged; worst error %.3g of the probabilistic budget (fp32: %.3g)\n",
      judged, worst, worst_fp32);
}

}  // namespace
}  // namespace ulpcheck
