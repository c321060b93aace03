// The rounding-bias statistic (properties/property.h, RoundingBias; its bound
// in oracles/rounding_bias.h): a truncating or one-way conversion is named,
// rounding to nearest is not, whatever the computation's own error does
// within its bound, on random rows, constant rows and one wide row alike;
// elements whose bound is loose are not counted; the figures go to JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/case_spec.h"
#include "harness/runner/run_case.h"
#include "properties/accuracy.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

DescribeInputs noInputs() {
  return [](const std::string&, int64_t, int64_t) { return std::string(); };
}

/// How a synthetic kernel rounds its value v to bf16.
enum class Rounding { Nearest, TowardZero, Up };

double roundBf16(double v, Rounding how) {
  uint32_t bits = doubleToBits(DType::BF16, v);
  const double nearest = decodeBits(DType::BF16, bits);
  // Codes of one sign are ordered as their magnitudes: a step of one code is
  // the next value away from zero, or toward it.
  if (how == Rounding::TowardZero && std::fabs(nearest) > std::fabs(v)) --bits;
  if (how == Rounding::Up && nearest < v) bits += std::signbit(v) ? -1 : 1;
  return decodeBits(DType::BF16, bits);
}

struct Synthetic {
  int64_t rows = 128, cols = 256;
  bool per_row = true;
  double computed_ulps = 0x1p-10;  // the computation's error bound E, in ulps of each exact value
  double shift_ulps = 0;           // the computation's actual error, every element the same way, in ulps
  bool rows_constant = false;      // every element of a row the same exact value
  Rounding rounding = Rounding::Nearest;
};

/// A bf16 tensor of random exact values, its budgets E + half an ulp, and
/// the outputs of a kernel whose value before its final rounding is
/// exact + shift, rounded as `s.rounding` says; judged.
Outcome judgeSynthetic(const Synthetic& s) {
  std::mt19937_64 rng(0x5eed);
  std::normal_distribution<double> normal;
  ReferenceTensor ref = ReferenceTensor::zeros("y", DType::BF16, s.rows, s.cols, s.per_row);
  RunResult run;
  OutputTensor out{"y", DType::BF16, s.rows, s.cols, s.cols, s.per_row, PackedBits(2, size_t(s.rows * s.cols))};
  PackedBits& bits = out.bits;
  for (int64_t r = 0; r < s.rows; ++r) {
    const double row_value = normal(rng);
    for (int64_t c = 0; c < s.cols; ++c) {
      const size_t i = size_t(r * s.cols + c);
      const double exact = s.rows_constant ? row_value : normal(rng), unit = ulpOf(DType::BF16, exact);
      ref.exact[i] = exact;
      ref.budget[i] = budgetFromError(DType::BF16, exact, s.computed_ulps * unit);
      bits[i] = doubleToBits(DType::BF16, roundBf16(exact + s.shift_ulps * unit, s.rounding));
    }
  }
  run.outputs.push_back(std::move(out));
  return judgeAccuracy(run, {ref}, noInputs());
}

RoundingBias biasOf(const Synthetic& s) { return judgeSynthetic(s).stats.at(0).bias; }

TEST(RoundingBias, TruncationIsNamedAndRoundingToNearestIsNot) {
  const Outcome nearest = judgeSynthetic({});
  ASSERT_EQ(nearest.stats.size(), 1u);
  const RoundingBias& fair = nearest.stats[0].bias;
  EXPECT_EQ(nearest.verdict, Verdict::Pass) << nearest.summary;
  EXPECT_EQ(fair.elements, 128 * 256);
  EXPECT_FALSE(fair.biased());
  EXPECT_EQ(fair.miss_ulp, 0);  // a bound of 2^-10 ulp: every value rounds as its exact one
  EXPECT_LT(fair.outward_below, 0.01);
  EXPECT_LT(std::fabs(fair.error_outward_ulp), 0.02);

  Synthetic truncating;
  truncating.rounding = Rounding::TowardZero;
  const Outcome truncated = judgeSynthetic(truncating);
  const RoundingBias& lean = truncated.stats[0].bias;
  EXPECT_EQ(truncated.verdict, Verdict::Fail);
  EXPECT_TRUE(lean.biased());
  EXPECT_NEAR(lean.miss_outward_ulp, -0.5, 0.02);   // half the elements one ulp toward zero
  EXPECT_NEAR(lean.error_outward_ulp, -0.5, 0.02);  // and the errors as much
  EXPECT_LT(std::fabs(lean.miss_ulp), 0.02);        // of either sign: the signed mean does not see it
  EXPECT_NE(truncated.summary.find("rounding biased in y"), std::string::npos) << truncated.summary;

  Synthetic upward;
  upward.rounding = Rounding::Up;
  const RoundingBias up = biasOf(upward);
  EXPECT_TRUE(up.biased());
  EXPECT_NEAR(up.miss_ulp, 0.5, 0.02);
}

TEST(RoundingBias, AComputationErrorLeaningOneWayMissesOnlyWhereItsBoundReachesABoundary) {
  // Every value off by its whole bound, the same way (an rstd low by its
  // bound shifts a whole row so), then rounded to nearest: a quarter of the
  // elements miss their correctly rounded value, all upward, each one
  // within its bound's reach of a boundary, which the allowance counts.
  for (const double shift : {0.25, -0.25}) {
    Synthetic shifted;
    shifted.computed_ulps = 0.25;
    shifted.shift_ulps = shift;
    const Outcome o = judgeSynthetic(shifted);
    const RoundingBias& b = o.stats[0].bias;
    EXPECT_EQ(o.verdict, Verdict::Pass) << o.summary;
    EXPECT_FALSE(b.biased());
    EXPECT_NEAR(b.miss_ulp, shift, 0.03);
    EXPECT_NEAR(shift > 0 ? b.above : b.below, 0.25, 0.03);  // the share within a quarter ulp of a boundary
    EXPECT_LE(b.miss_ulp, b.above);
    EXPECT_GE(b.miss_ulp, -b.below);
  }
}

TEST(RoundingBias, ConstantRowsAndOneWideRowAreJudgedAsAnyOther) {
  // No model of the data: a row of one repeated value rounds as one value,
  // and one row of many values decides as many rows do.
  Synthetic constant;
  constant.rows_constant = true;
  EXPECT_FALSE(biasOf(constant).biased());
  constant.rounding = Rounding::TowardZero;
  EXPECT_TRUE(biasOf(constant).biased());

  Synthetic wide;
  wide.rows = 1;
  wide.cols = 65536;
  EXPECT_FALSE(biasOf(wide).biased());
  wide.rounding = Rounding::TowardZero;
  const RoundingBias one = biasOf(wide);
  EXPECT_TRUE(one.biased());
  EXPECT_NEAR(one.miss_outward_ulp, -0.5, 0.02);
}

TEST(RoundingBias, ElementsWhoseBoundIsLooseAreNotCounted) {
  // Past kBiasSelectUlps an element's own error may move it across a
  // boundary often: its rounding's direction is not what it shows.
  Synthetic loose;
  loose.computed_ulps = 0.3;
  loose.rounding = Rounding::TowardZero;
  const Outcome o = judgeSynthetic(loose);
  EXPECT_EQ(o.stats[0].bias.elements, 0);
  EXPECT_FALSE(o.stats[0].bias.biased());
  EXPECT_NE(describeBias(o.stats[0].bias).find("none counted"), std::string::npos);
}

TEST(RoundingBias, TheFiguresGoToJsonAndBack) {
  Synthetic shifted;
  shifted.computed_ulps = 0.25;
  shifted.shift_ulps = 0.25;
  shifted.rounding = Rounding::TowardZero;
  const Outcome o = judgeSynthetic(shifted);
  const nlohmann::json j = nlohmann::json::parse(toJson(o).dump());
  EXPECT_TRUE(j.at("stats")[0].at("bias").at("biased").get<bool>());
  const RoundingBias &a = o.stats[0].bias, &b = outcomeFromJson(j).stats[0].bias;
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.error_ulp, b.error_ulp);
  EXPECT_EQ(a.error_outward_ulp, b.error_outward_ulp);
  EXPECT_EQ(a.miss_ulp, b.miss_ulp);
  EXPECT_EQ(a.miss_outward_ulp, b.miss_outward_ulp);
  EXPECT_EQ(a.below, b.below);
  EXPECT_EQ(a.above, b.above);
  EXPECT_EQ(a.outward_below, b.outward_below);
  EXPECT_EQ(a.outward_above, b.outward_above);
  EXPECT_TRUE(b.biased());
}

TEST(RoundingBias, ARmsNormThatTruncatesYIsNamedAndItsCorrectPortIsNot) {
  // The host mutant of aiter #5151 and the correct port, on one case: y
  // misses toward zero by half an ulp.
  const std::string tail = " dtype=bf16 M=256 N=1024 dist=normal seed=0x5";
  const auto judged = [&](const std::string& kernel) {
    const auto r = runCase(parseCaseString("op=rmsnorm kernel=" + kernel + tail), {"accuracy"}, testing::hostContext());
    EXPECT_EQ(r.size(), 1u);
    return r.at(0).outcome;
  };
  const Outcome truncating = judged("host_bug_truncating_y_store"), correct = judged("host_separate");
  EXPECT_EQ(truncating.verdict, Verdict::Fail);
  EXPECT_NE(truncating.summary.find("rounding biased"), std::string::npos) << truncating.summary;
  EXPECT_EQ(correct.verdict, Verdict::Pass) << correct.summary;
  for (const TensorStats& s : truncating.stats) {
    if (s.tensor == "y") {
      EXPECT_NEAR(s.bias.miss_outward_ulp, -0.5, 0.02);
    } else {
      EXPECT_FALSE(s.bias.biased()) << s.tensor;  // dx, dW: the mutant's backward is the correct one
    }
  }
  for (const TensorStats& s : correct.stats) {
    EXPECT_FALSE(s.bias.biased()) << s.tensor;
    if (s.tensor == "y") {
      EXPECT_GT(s.bias.elements, 256 * 1000);
    }
  }
}

}  // namespace
}  // namespace ulpcheck
