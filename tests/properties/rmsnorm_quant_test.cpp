// rmsnorm_quant (RMSNorm + FP8 output): the host port passes on every spec
// (each fp8 value it stores is one the oracle admits); past the format's
// range a saturating spec admits only the largest finite value and a
// non-finite one only its overflow value; an unwritten element is seen where
// its poison (NaN) is a legal output; the mutants fail where and as their
// bugs say.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/case_spec.h"
#include "harness/runner/run_case.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "properties/op.h"
#include "properties/rmsnorm_quant_inputs.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

const std::string kBase = "op=rmsnorm_quant M=7 N=96 ld=100 eps=0x1.0c6f7ap-20 dist=normal sigma=0x1p+0 "
                          "mean=0x0p+0 dy_sigma=0x1p+0";

/// A case whose static scale is below amax / fmax for every normal row
/// (s fmax in [0.5, 1): the smallest that staticQuantScale draws), so many
/// elements pass the format's largest finite value.
CaseSpec overflowingCase(const std::string& kernel, const std::string& spec, const std::string& dtype = "bf16") {
  for (uint64_t seed = 0;; ++seed) {
    CaseSpec c = parseCaseString(fmt::format("{} kernel={} dtype={} seed={:#x} {}", kBase, kernel, dtype, seed, spec));
    if (double(staticQuantScale(c)) * fp8MaxFinite(kFp8Format(c.spec)) < 1.0) return c;
  }
}

Outcome judged(const CaseSpec& c, const std::string& property) {
  const auto r = runCase(c, {property}, testing::hostContext());
  EXPECT_EQ(r.size(), 1u);
  return r.at(0).outcome;
}

TEST(RmsNormQuant, EveryValueTheHostPortStoresIsAdmittedOnEverySpec) {
  int cases = 0;
  for (const char* dtype : {"bf16", "fp16", "fp32"})
    for (const char* quant : {"static", "token", "group128", "group64"})
      for (const char* format : {"e4m3", "e5m2"})
        for (const char* overflow : {"satfinite", "nonfinite"})
          for (const char* inverse : {"exact", "approx", "divide"})
            for (const bool in_t : {false, true}) {
              const std::string spec = fmt::format("quant={} fp8={} overflow={} inverse={}{}", quant, format, overflow,
                                                   inverse, in_t ? fmt::format(" scaled={}", dtype) : "");
              const CaseSpec c = overflowingCase("host_rmsnorm_quant", spec, dtype);
              int judged_by = 0;
              for (const ReplayResult& r : runCase(c, {}, testing::hostContext())) {
                judged_by += r.applies && r.outcome.judged();
                EXPECT_EQ(r.outcome.verdict, Verdict::Pass) << toCaseString(c) << "\n"
                                                            << r.property << ": " << r.outcome.summary;
              }
              EXPECT_EQ(judged_by, 4) << toCaseString(c) << ": accuracy, batch invariance, determinism, memory safety";
              ++cases;
            }
  EXPECT_EQ(cases, 288);
}

TEST(RmsNormQuant, PastTheRangeASaturatingSpecAdmitsTheLargestFiniteValueANonFiniteOneItsOverflowValue) {
  for (const char* format : {"e4m3", "e5m2"}) {
    const CaseSpec sat = overflowingCase("host_rmsnorm_quant", fmt::format("fp8={}", format));
    const CaseSpec nonfinite = overflowingCase("host_rmsnorm_quant", fmt::format("fp8={} overflow=nonfinite", format));
    const double fmax = fp8MaxFinite(kFp8Format(sat.spec));
    const ReferenceTensor s = findOp("rmsnorm_quant")->reference(sat, testing::hostContext()).at(0);
    const ReferenceTensor n = findOp("rmsnorm_quant")->reference(nonfinite, testing::hostContext()).at(0);
    int64_t past = 0;
    for (size_t i = 0; i < s.exact.size(); ++i) {
      // The exact value of y / s, unclamped: n's (the non-finite spec clamps nothing).
      const double x = n.exact[i];
      if (std::fabs(x) < 2 * fmax) continue;  // well past: no y within its budget rounds below
      ++past;
      EXPECT_EQ(s.admissible.lo[i], std::copysign(fmax, x)) << format << " element " << i;
      EXPECT_EQ(s.admissible.hi[i], std::copysign(fmax, x));
      EXPECT_EQ(s.admissible.overflow[i], 0);
      EXPECT_EQ(s.exact[i], std::copysign(fmax, x)) << "a saturating spec's exact value is clamped";
      EXPECT_GT(n.admissible.lo[i], n.admissible.hi[i]) << "no finite value";
      EXPECT_EQ(n.admissible.overflow[i], x > 0 ? AdmissibleValues::kOverflowAbove : AdmissibleValues::kOverflowBelow);
      EXPECT_EQ(n.admissible.admits(n.dtype, i, NAN), n.dtype == DType::E4M3);
      EXPECT_EQ(n.admissible.admits(n.dtype, i, std::copysign(INFINITY, x)), n.dtype == DType::E5M2);
      EXPECT_FALSE(n.admissible.admits(n.dtype, i, std::copysign(fmax, x)));
    }
    EXPECT_GT(past, 50) << format;
  }
}

TEST(RmsNormQuant, AnUnwrittenElementIsSeenWhereItsPoisonIsALegalValue) {
  // overflow=nonfinite in E4M3: overflowing elements are NaN, E4M3's poison.
  const CaseSpec correct = overflowingCase("host_rmsnorm_quant", "overflow=nonfinite");
  CaseSpec skipped = correct;
  skipped.kernel = "host_bug_skipped_fp8_store";
  EXPECT_EQ(judged(correct, "accuracy").verdict, Verdict::Pass);
  const Outcome fine = judged(correct, "memory_safety");
  EXPECT_EQ(fine.verdict, Verdict::Pass) << fine.summary;
  const Outcome bad = judged(skipped, "memory_safety");
  EXPECT_EQ(bad.verdict, Verdict::Fail);
  EXPECT_NE(bad.summary.find("1 unwritten"), std::string::npos) << bad.summary;
  // The run did store NaN (legal) elsewhere: the poison alone could not tell.
  const RunResult run = findOp("rmsnorm_quant")->run(correct, identityRows(correct.M), testing::hostContext());
  int64_t nan = 0;
  for (int64_t r = 0; r < correct.M; ++r)
    for (int64_t col = 0; col < correct.N; ++col) nan += std::isnan(run.find("y")->value(r, col));
  EXPECT_GT(nan, 10);
}

TEST(RmsNormQuant, PerGroupScalesAreOnePerGroupOfColumnsTheLastShorter) {
  // N = 96: one group of 96 under group128, groups of 64 and 32 under
  // group64; each scale is its group's largest |y| over 448 (the exact value
  // the oracle gives), stored row-major.
  for (const auto& [quant, groups] : {std::pair{"group128", 1}, std::pair{"group64", 2}}) {
    const CaseSpec c = overflowingCase("host_rmsnorm_quant", fmt::format("quant={}", quant));
    const auto ref = findOp("rmsnorm_quant")->reference(c, testing::hostContext());
    ASSERT_EQ(ref.size(), 2u);
    const ReferenceTensor &y = ref.at(0), &scale = ref.at(1);
    EXPECT_EQ(scale.cols, groups) << quant;
    for (int64_t r = 0; r < c.M; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t width = groups == 1 ? c.N : 64;
        double amax = 0;  // the largest |exact y|: |y_q| * s of the exact values
        for (int64_t j = g * width; j < std::min(c.N, (g + 1) * width); ++j)
          amax = std::max(amax, std::fabs(y.exact[size_t(r * c.N + j)] * scale.exact[size_t(r * groups + g)]));
        EXPECT_NEAR(scale.exact[size_t(r * groups + g)], amax / 448, 1e-12 * amax) << quant << " row " << r;
      }
    EXPECT_EQ(judged(c, "accuracy").verdict, Verdict::Pass) << quant;
  }
}

TEST(RmsNormQuant, MutantsFailAsTheirBugsSay) {
  const auto fails = [](const std::string& kernel, const std::string& spec, const char* tensor) {
    const CaseSpec c = overflowingCase(kernel, spec);
    const Outcome o = judged(c, "accuracy");
    EXPECT_EQ(o.verdict, Verdict::Fail) << kernel;
    EXPECT_FALSE(o.findings.empty());
    if (!o.findings.empty()) {
      EXPECT_EQ(o.findings.front().tensor, tensor) << kernel << ": " << o.summary;
    }
    return o;
  };
  // Truncation: about half the elements below the largest value one code
  // toward zero (those past it saturate alike), named by the rounding bias.
  const Outcome truncating = fails("host_bug_truncating_fp8", "", "y");
  ASSERT_FALSE(truncating.stats.empty());
  EXPECT_TRUE(truncating.stats.front().bias.biased());
  EXPECT_LT(truncating.stats.front().bias.miss_outward_ulp, -0.2);
  // NaN where 448 is due.
  const Outcome unsaturated = fails("host_bug_no_saturation", "", "y");
  EXPECT_TRUE(std::isnan(unsaturated.findings.front().got));
  // The scale of bf16-rounded y: every row's scale off, and every group's.
  fails("host_bug_token_scale_of_rounded_y", "quant=token", "scale");
  fails("host_bug_token_scale_of_rounded_y", "quant=group64", "scale");
  // One code off where no boundary is near.
  fails("host_bug_one_fp8_ulp_off", "", "y");
}

}  // namespace
}  // namespace ulpcheck
