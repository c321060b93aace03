// The power of the accuracy verdict in the two regimes where budgets used to
// admit gross errors (issue: "no vacuous pass"): injected errors are either
// caught or the case is reported inconclusive, never passed.
#include <gtest/gtest.h>

#include "core/datagen.h"
#include "kernels/common/row_plan.h"
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

OutputTensor& output(RunResult& r, const std::string& name) {
  for (OutputTensor& t : r.outputs)
    if (t.name == name) return t;
  throw std::logic_error("no output " + name);
}

/// The LayerNorm case's own host run with every y replaced by
/// inject(beta_j, gamma_j), judged against the oracle.
Outcome judgeInjectedY(const std::string& case_text, double (*inject)(double beta, double gamma)) {
  const CaseSpec c = parseCaseString(case_text);
  const OpAdapter& op = *findOp(c.op);
  RunResult run = op.run(c, identityRows(c.M), hostContext());
  const LayerNormInputData in = generateLayerNormInputs(c, identityRows(c.M));
  OutputTensor& y = output(run, "y");
  for (int64_t r = 0; r < y.rows; ++r)
    for (int64_t j = 0; j < y.cols; ++j)
      y.bits[size_t(r * y.ld + j)] = doubleToBits(c.dtype, inject(in.beta.value(0, j), in.gamma.value(0, j)));
  return judgeAccuracy(run, op.reference(c, hostContext()), noInputs());
}

double beta(double b, double) { return b; }                 // xhat lost: y = beta
double betaPlusGamma(double b, double g) { return b + g; }  // xhat = 1 where the row is constant

TEST(Power, YIsBetaOnLargeMeanRowsIsCaughtOrInconclusiveNeverAPass) {
  // fp32 at |mean| / sigma = 2^20: no fp32 kernel knows xhat there.
  const Outcome extreme = judgeInjectedY(
      "op=layernorm kernel=host_twopass dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-10", beta);
  EXPECT_EQ(extreme.verdict, Verdict::Inconclusive) << extreme.summary;
  // Judged, and y = beta is caught: fp32 at 2^8, 16-bit rows of large mean
  // that still vary (their fp32 sums are exact).
  for (const char* judged :
       {"op=layernorm kernel=host_twopass dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p2",
        "op=layernorm kernel=host_twopass dtype=fp16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p1",
        "op=layernorm kernel=host_twopass dtype=bf16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p5"}) {
    const Outcome o = judgeInjectedY(judged, beta);
    EXPECT_EQ(o.verdict, Verdict::Fail) << judged << "\n" << o.summary;
  }
  // 16-bit at 2^12: the rows round to constants, where y = beta is right
  // and anything else (here y = beta + gamma) is caught.
  for (const char* constant :
       {"op=layernorm kernel=host_twopass dtype=bf16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-2",
        "op=layernorm kernel=host_twopass dtype=fp16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-6"}) {
    EXPECT_EQ(judgeInjectedY(constant, beta).verdict, Verdict::Pass) << constant;
    const Outcome o = judgeInjectedY(constant, betaPlusGamma);
    EXPECT_EQ(o.verdict, Verdict::Fail) << constant << "\n" << o.summary;
  }
}

/// host_twopass's run of the case with each element v of `tensor` (y by
/// default) replaced by inject(v), judged with or without the bounds about
/// its own saved statistics (it declares uses_saved_statistics: y =
/// fma(fl(fl(x - mean) r), g, b), its backward's x-hat from the saved ones).
Outcome judgeOnSavedStatistics(const std::string& case_text, double (*inject)(double), bool conditional,
                               const std::string& tensor = "y") {
  const CaseSpec c = parseCaseString(case_text);
  const OpAdapter& op = *findOp(c.op);
  InputCache inputs;
  ExecContext ctx = hostContext();
  ctx.inputs = &inputs;
  RunResult run = op.run(c, identityRows(c.M), ctx);
  OutputTensor& t = output(run, tensor);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t j = 0; j < t.cols; ++j) {
      const size_t e = size_t(r * t.ld + j);
      t.bits[e] = doubleToBits(t.dtype, inject(decodeBits(t.dtype, t.bits[e])));
    }
  const std::unique_ptr<ConditionalBounds> own = conditional ? op.conditionalBounds(c, ctx, run) : nullptr;
  EXPECT_EQ(own != nullptr, conditional);
  return judgeAccuracy(run, op.reference(c, ctx), noInputs(), own.get());
}

double unchanged(double y) { return y; }
double offByOnePart(double y) { return y * (1.0 + 0x1p-9); }  // 2^14 ulp of fp32

TEST(Power, AnErrorInYsOwnArithmeticHiddenByTheStatisticsBudgetIsCaughtOnTheSavedStatistics) {
  // fp32 constant rows at eps 1e-12: the mean's legitimate error times
  // rstd = 1e6 is all of y - beta, so about the exact value y is unjudged
  // and y off by 2^-9 of itself passes unseen. About the kernel's own saved
  // mean and rstd, y is known to a few ulp: the correct run passes with
  // power, the injected error fails, saying from what.
  const char* text = "op=layernorm kernel=host_twopass dtype=fp32 M=3 N=127 eps=0x1.197998p-40 dist=constant_rows";
  const Outcome blind = judgeOnSavedStatistics(text, offByOnePart, false);
  EXPECT_EQ(blind.verdict, Verdict::Inconclusive) << blind.summary;
  EXPECT_EQ(judgeOnSavedStatistics(text, unchanged, true).verdict, Verdict::Pass);
  const Outcome seen = judgeOnSavedStatistics(text, offByOnePart, true);
  EXPECT_EQ(seen.verdict, Verdict::Fail) << seen.summary;
  EXPECT_NE(seen.summary.find("within its budget of the exact value, but"), std::string::npos) << seen.summary;
  EXPECT_NE(seen.summary.find("from its own saved mean and rstd, as (x - mean) rstd gamma + beta"), std::string::npos)
      << seen.summary;
}

TEST(Power, ADgammaOffFromItsOwnStatisticsIsCaughtWhereItsExactBudgetCannotSeeIt) {
  // fp32 rows of |mean| / sigma = 2^20: dgamma sums every row's legitimate
  // fp32 mean error times dy, so about the exact value no tensor-wide error
  // of 2^-9 shows (inconclusive). About the kernel's own saved mean and rstd
  // (sum_i dy (x - mean) rstd, over every row) dgamma is known to a few
  // ulps: the correct run passes with power, the injected error fails.
  const char* text = "op=layernorm kernel=host_twopass dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-10";
  const Outcome blind = judgeOnSavedStatistics(text, offByOnePart, false, "dgamma");
  EXPECT_EQ(blind.verdict, Verdict::Inconclusive) << blind.summary;
  EXPECT_NE(blind.summary.find("dgamma"), std::string::npos) << blind.summary;
  EXPECT_EQ(judgeOnSavedStatistics(text, unchanged, true, "dgamma").verdict, Verdict::Pass);
  const Outcome seen = judgeOnSavedStatistics(text, offByOnePart, true, "dgamma");
  EXPECT_EQ(seen.verdict, Verdict::Fail) << seen.summary;
  EXPECT_NE(seen.summary.find("from its own saved mean and rstd, as sum_i dy (x - mean) rstd"), std::string::npos)
      << seen.summary;
  // Where dgamma's budgets about the exact value already have power, its
  // bound about the run's statistics is not applied (onlyWithoutPower): the
  // same injected error is judged as before, against the exact value alone.
  const char* sharp = "op=layernorm kernel=host_twopass dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p2";
  const Outcome plain = judgeOnSavedStatistics(sharp, offByOnePart, false, "dgamma");
  const Outcome own = judgeOnSavedStatistics(sharp, offByOnePart, true, "dgamma");
  EXPECT_EQ(plain.verdict, Verdict::Fail) << plain.summary;
  EXPECT_EQ(own.summary, plain.summary);
}

TEST(Power, TheCorrectKernelOnTheSameRowsIsJudgedWithFullPower) {
  for (const char* text :
       {"op=layernorm kernel=host_twopass dtype=bf16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-2",
        "op=layernorm kernel=host_twopass dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p2",
        "op=layernorm kernel=host_twopass dtype=fp32 M=3 N=127 dist=constant_rows eps=0x1.4f8b58p-17",
        "op=rmsnorm kernel=host_lastblock dtype=fp32 M=32768 N=2",
        "op=rmsnorm kernel=host_separate dtype=bf16 M=32768 N=3"}) {
    const auto r = runCase(parseCaseString(text), {"accuracy"}, hostContext());
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].outcome.verdict, Verdict::Pass) << text << "\n" << r[0].outcome.summary;
  }
}

TEST(Power, OnePartialAmongThousandsIsCaughtWhereTheDepthBoundAdmitsIt) {
  // M = 32768 narrow rows: 4224 CTAs (an H100's grid at 32 threads), column
  // depth 4232. The mutant leaves the last CTA's dW partial (8 rows) out.
  const CaseSpec c = parseCaseString("op=rmsnorm kernel=host_bug_lastblock_drops_partial dtype=fp32 M=32768 N=2");
  const OpAdapter& op = *findOp(c.op);
  const RunResult run = op.run(c, identityRows(c.M), hostContext());
  const std::vector<ReferenceTensor> ordered = op.reference(c, hostContext());
  const Outcome sharp = judgeAccuracy(run, ordered, noInputs());
  EXPECT_EQ(sharp.verdict, Verdict::Fail) << sharp.summary;

  // The same oracle without the order (depth * u * sum|terms| only), as the
  // budget was: the dropped partial fits inside it, and that budget is too
  // wide to call the case judged.
  const RmsNormInputData in = generateRmsNormInputs(c, identityRows(c.M));
  const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
  ReductionDepths depths = row_plan::reductionDepths(shape, LaunchEnv{132, 0, nullptr},
                                                     row_plan::DwStrategy::LastBlock);
  ASSERT_GE(depths.col, 1000);
  depths.col_orders.clear();
  RmsNormReference depth_only = rmsnormReference(RmsNormInputs{in.x, in.w, in.dy, c.eps},
                                                 AccuracyContract{DType::F32, depths}, ThreadPool::shared(),
                                                 OracleMode::Fast);
  const Outcome vacuous = judgeAccuracy(run, {depth_only.y, depth_only.rstd, depth_only.dx, depth_only.dw}, noInputs());
  EXPECT_EQ(vacuous.verdict, Verdict::Inconclusive) << vacuous.summary;
  for (const TensorStats& s : vacuous.stats)
    if (s.tensor == "dw") {
      EXPECT_EQ(s.wrong, 0) << "the depth bound admits the missing partial";
    }
}

TEST(Power, OnePassVarianceIsCaughtOnLargeMeanRows) {
  // |mean| / sigma = 2^12 and 2^16 in fp32; 16-bit rows of large mean that
  // still vary (2^9, 2^5).
  for (const char* text :
       {"op=layernorm kernel=host_bug_one_pass_variance dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-2",
        "op=layernorm kernel=host_bug_one_pass_variance dtype=fp32 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p-6",
        "op=layernorm kernel=host_bug_one_pass_variance dtype=fp16 M=4 N=256 dist=large_mean mean=0x1p10 sigma=0x1p1",
        "op=layernorm kernel=host_bug_one_pass_variance dtype=bf16 M=4 N=256 dist=large_mean mean=0x1p10 "
        "sigma=0x1p5"}) {
    const auto r = runCase(parseCaseString(text), {"accuracy"}, hostContext());
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].outcome.verdict, Verdict::Fail) << text << "\n" << r[0].outcome.summary;
  }
}

/// One fp16 element of exact value `exact` and budget `budget`, judged with `got`.
Verdict judgeOneFp16(double exact, double budget, double got) {
  ReferenceTensor ref;
  ref.name = "dx";
  ref.dtype = DType::F16;
  ref.rows = ref.cols = 1;
  ref.exact = {exact};
  ref.budget = {budget};
  RunResult run;
  run.outputs.push_back(OutputTensor{"dx", DType::F16, 1, 1, 1, false, {doubleToBits(DType::F16, got)}});
  return judgeAccuracy(run, {ref}, noInputs()).verdict;
}

TEST(Power, AnInfinityIsAllowedOnWhicheverSideTheBudgetReachesOverflow) {
  // Liger's fp16 LayerNorm backward on constant rows at eps = 2^-40 (found
  // on the H200): the fp32 mean one ulp off makes x-hat +-1 where the exact
  // one is 0, and dx of exact -25355 may come out beyond either overflow.
  // The budget (1.2e8 there) says so; an Inf of the other sign is not a
  // failure. Where the budget stops short of overflow, it is.
  // (Not failed; inconclusive: such budgets cannot judge.)
  EXPECT_EQ(judgeOneFp16(-25355.0, 1.2e8, INFINITY), Verdict::Inconclusive);
  EXPECT_EQ(judgeOneFp16(-25355.0, 1.2e8, -INFINITY), Verdict::Inconclusive);
  EXPECT_EQ(judgeOneFp16(-25355.0, 50000.0, -INFINITY), Verdict::Inconclusive);  // -75355 is past -65520
  EXPECT_EQ(judgeOneFp16(-25355.0, 50000.0, INFINITY), Verdict::Fail);           // 24645 is not past 65520
  EXPECT_EQ(judgeOneFp16(25355.0, 1000.0, INFINITY), Verdict::Fail);
}

}  // namespace
}  // namespace ulpcheck
