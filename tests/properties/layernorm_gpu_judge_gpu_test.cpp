// The LayerNorm GPU judge (oracles/layernorm_device.h,
// properties/layernorm_gpu_judge.h) against the host's: on one run, both
// must give the same outcome (verdict, per-tensor figures, error
// distributions, findings; rms_ulp to 1e-9) for correct variants and for
// mutants that fail accuracy, over every spec the judge models (affine
// full, nobias, none; gamma in T or fp32; judged on the saved statistics
// too where the variant declares it), when the double words decide
// everything and when widened intervals send rows and dgamma/dbeta columns
// to the host; and the GPU judge's own run must agree with the host's
// judgment of the base run.
#include <gtest/gtest.h>

#include <cstdio>

#include <rapidcheck.h>

#include "core/case_spec.h"
#include "kernels/layernorm/layernorm.h"
#include "oracles/oracle_mode.h"
#include "properties/accuracy.h"
#include "properties/case_context.h"
#include "properties/generators.h"
#include "properties/layernorm_gpu_judge.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

/// Cases of `kernel` as a campaign of `tier` draws them, those the GPU judge models.
std::vector<CaseSpec> judgedCases(const std::string& kernel, Tier tier, uint64_t seed, int count) {
  const KernelInfo& k = LayerNormRegistry::find(kernel)->info;
  return testing::drawnCases(kernel, tier, seed, count,
                             [&](const CaseSpec& c) { return layernormGpuJudgeApplies(c, k); });
}

struct Compared {
  Outcome host, gpu;
};

/// Both judges on the base run of case c (the GPU judge given its outputs),
/// the host's with the op's own bounds about the run's saved statistics.
Compared judgeBoth(const CaseSpec& c, double widen = 1.0) {
  const ExecContext exec = testing::cudaContext();
  const OpAdapter& op = *findOp("layernorm");
  CaseContext ctx(c, op, exec);
  const auto describe = [&](const std::string& t, int64_t r, int64_t col) { return op.describeInputs(c, t, r, col); };
  const std::unique_ptr<ConditionalBounds> own = op.conditionalBounds(c, ctx.exec(), ctx.baseRun());
  Compared out;
  out.host = judgeAccuracy(ctx.baseRun(), ctx.reference(), describe, own.get());
  out.gpu = layernormAccuracyOnGpu(c, *LayerNormRegistry::find(c.kernel), exec, describe, &ctx.baseRun(), widen);
  return out;
}

TEST(LayerNormGpuJudge, SameOutcomesAsTheHostJudgeForCorrectVariantsAndMutants) {
  ULPCHECK_REQUIRE_GPU();
  int64_t cases = 0, failing = 0, passing = 0, affine[3] = {0, 0, 0};
  for (const auto& kernel : LayerNormRegistry::all()) {
    if (kernel.info.backend != Backend::Cuda) continue;
    // The mutants whose bug accuracy must catch, and every correct variant.
    if (kernel.info.isMutant() && kernel.info.caught_by != "accuracy") continue;
    for (Tier tier : {Tier::Smoke, Tier::Default})
      for (const CaseSpec& c : judgedCases(kernel.info.name, tier, 0x1a6e, 24)) {
        const Compared r = judgeBoth(c);
        EXPECT_EQ(outcomeDifference(r.host, r.gpu), "")
            << toCaseString(c) << "\nhost: " << r.host.summary << "\ngpu:  " << r.gpu.summary;
        ++cases;
        failing += r.host.verdict == Verdict::Fail;
        passing += r.host.verdict == Verdict::Pass;
        ++affine[int(kAffine(c.spec))];
      }
  }
  std::printf("%lld cases judged alike: %lld failing, %lld passing; affine full %lld, nobias %lld, none %lld\n",
              (long long)cases, (long long)failing, (long long)passing, (long long)affine[int(Affine::Full)],
              (long long)affine[int(Affine::NoBias)], (long long)affine[int(Affine::None)]);
  EXPECT_GT(cases, 60);
  EXPECT_GT(failing, 10);  // the mutants' failures, with their findings
  EXPECT_GT(passing, 30);
  EXPECT_GT(affine[int(Affine::NoBias)] + affine[int(Affine::None)], 3);
}

TEST(LayerNormGpuJudge, RowsAndColumnsSentToTheHostGiveTheSameOutcome) {
  ULPCHECK_REQUIRE_GPU();
  // Intervals widened until the double words decide about half, then none,
  // of the values: every mix of GPU rows, host rows and host column sums.
  int64_t mixed = 0;
  for (const std::string kernel : {"cuda_twopass", "cuda_bug_one_pass_variance"})
    for (const CaseSpec& c : judgedCases(kernel, Tier::Smoke, 0xfa12, 10))
      for (double widen : {0x1p46, 0x1p49, 0x1p52, 0x1p80}) {
        const int64_t fast = oracleCounts().fast.load(), fell_back = oracleCounts().fell_back.load();
        const Compared r = judgeBoth(c, widen);
        EXPECT_EQ(outcomeDifference(r.host, r.gpu), "") << toCaseString(c) << " widened " << widen;
        mixed += oracleCounts().fast.load() > fast && oracleCounts().fell_back.load() > fell_back;
      }
  EXPECT_GT(mixed, 10);
}

TEST(LayerNormGpuJudge, ItsOwnRunOfADeterministicVariantAgreesWithTheHost) {
  ULPCHECK_REQUIRE_GPU();
  // A case of 16 M elements (many row-loop passes, dgamma over 64 chunks and
  // every CTA order), one without gamma or beta, and a few generated ones.
  std::vector<CaseSpec> cases = judgedCases("cuda_twopass", Tier::Default, 0x0de, 6);
  cases.push_back(parseCaseString("op=layernorm kernel=cuda_twopass dtype=bf16 M=4096 N=4096"));
  cases.push_back(parseCaseString("op=layernorm kernel=cuda_twopass dtype=fp16 M=300 N=1000 affine=none"));
  const ExecContext exec = testing::cudaContext();
  const OpAdapter& op = *findOp("layernorm");
  for (const CaseSpec& c : cases) {
    CaseContext ctx(c, op, exec);
    const auto describe = [&](const std::string& t, int64_t r, int64_t col) { return op.describeInputs(c, t, r, col); };
    const std::unique_ptr<ConditionalBounds> own = op.conditionalBounds(c, ctx.exec(), ctx.baseRun());
    const Outcome host = judgeAccuracy(ctx.baseRun(), ctx.reference(), describe, own.get());
    const std::optional<Outcome> gpu = op.accuracyOnGpu(c, exec, nullptr);
    ASSERT_TRUE(gpu.has_value()) << toCaseString(c);
    EXPECT_EQ(outcomeDifference(host, *gpu), "") << toCaseString(c);
    EXPECT_NE(host.verdict, Verdict::Fail) << host.summary;
  }
}

}  // namespace
}  // namespace ulpcheck
