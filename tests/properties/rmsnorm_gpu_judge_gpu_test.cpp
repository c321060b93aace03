// The GPU judge (oracles/rmsnorm_device.h, properties/rmsnorm_gpu_judge.h)
// against the host's: on one run, both must give the same outcome (verdict,
// per-tensor figures, error distributions, findings; rms_ulp to 1e-9) for
// correct variants and for mutants that fail accuracy, when the double
// words decide everything and when widened intervals send rows and dW
// columns to the host, for black boxes (a plugin's variants, held to the
// probabilistic budget too); the GPU judge's own run of a deterministic
// variant must agree with the host's judgment of the base run; and a
// nondeterministic variant's determinism repeats, judged in place, must be
// called as the host calls them.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>

#include <rapidcheck.h>

#include "core/case_spec.h"
#include "harness/runner/campaign.h"
#include "kernels/plugin/plugin_loader.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "oracles/oracle_mode.h"
#include "properties/accuracy.h"
#include "properties/case_context.h"
#include "properties/generators.h"
#include "properties/rmsnorm_gpu_judge.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

/// Cases of `kernel` as a campaign of `tier` draws them, those the GPU judge models.
std::vector<CaseSpec> judgedCases(const std::string& kernel, Tier tier, uint64_t seed, int count) {
  const KernelInfo& k = RmsNormRegistry::find(kernel)->info;
  return testing::drawnCases(kernel, tier, seed, count,
                             [&](const CaseSpec& c) { return rmsnormGpuJudgeApplies(c, k); });
}

struct Compared {
  Outcome host, gpu;
};

/// Both judges on the base run of case c (the GPU judge given its outputs).
Compared judgeBoth(const CaseSpec& c, double widen = 1.0) {
  const ExecContext exec = testing::cudaContext();
  const OpAdapter& op = *findOp("rmsnorm");
  CaseContext ctx(c, op, exec);
  const auto describe = [&](const std::string& t, int64_t r, int64_t col) { return op.describeInputs(c, t, r, col); };
  Compared out;
  out.host = judgeAccuracy(ctx.baseRun(), ctx.reference(), describe);
  out.gpu = rmsnormAccuracyOnGpu(c, *RmsNormRegistry::find(c.kernel), exec, describe, &ctx.baseRun(), widen);
  return out;
}

TEST(GpuJudge, SameOutcomesAsTheHostJudgeForCorrectVariantsAndMutants) {
  ULPCHECK_REQUIRE_GPU();
  int64_t cases = 0, failing = 0, passing = 0;
  for (const auto& kernel : RmsNormRegistry::all()) {
    if (kernel.info.backend != Backend::Cuda) continue;
    // The mutants whose bug accuracy must catch, and every correct variant.
    if (kernel.info.isMutant() && kernel.info.caught_by != "accuracy") continue;
    for (Tier tier : {Tier::Smoke, Tier::Default})
      for (const CaseSpec& c : judgedCases(kernel.info.name, tier, 0x6a1d6e, 12)) {
        const Compared r = judgeBoth(c);
        EXPECT_EQ(outcomeDifference(r.host, r.gpu), "")
            << toCaseString(c) << "\nhost: " << r.host.summary << "\ngpu:  " << r.gpu.summary;
        ++cases;
        failing += r.host.verdict == Verdict::Fail;
        passing += r.host.verdict == Verdict::Pass;
      }
  }
  std::printf("%lld cases judged alike: %lld failing, %lld passing\n", (long long)cases, (long long)failing,
              (long long)passing);
  EXPECT_GT(cases, 100);
  EXPECT_GT(failing, 20);  // the mutants' failures, with their findings
  EXPECT_GT(passing, 60);
}

TEST(GpuJudge, RowsAndColumnsSentToTheHostGiveTheSameOutcome) {
  ULPCHECK_REQUIRE_GPU();
  // Intervals widened until the double words decide about half, then none,
  // of the values: every mix of GPU rows, host rows and host dW columns.
  int64_t mixed = 0;
  for (const std::string kernel : {"cuda_separate", "cuda_bug_x_squared_fp16"})
    for (const CaseSpec& c : judgedCases(kernel, Tier::Smoke, 0xfa11, 10))
      for (double widen : {0x1p46, 0x1p49, 0x1p52, 0x1p80}) {
        const int64_t fast = oracleCounts().fast.load(), fell_back = oracleCounts().fell_back.load();
        const Compared r = judgeBoth(c, widen);
        EXPECT_EQ(outcomeDifference(r.host, r.gpu), "") << toCaseString(c) << " widened " << widen;
        mixed += oracleCounts().fast.load() > fast && oracleCounts().fell_back.load() > fell_back;
      }
  EXPECT_GT(mixed, 10);
}

TEST(GpuJudge, ABlackBoxPluginIsJudgedAlikeWithItsProbabilisticBudget) {
  ULPCHECK_REQUIRE_GPU();
  // The example plugin's CUDA variants run in a worker process; a black box
  // is held to the probabilistic budget too where the data fit its model,
  // and its defect (dW partials summed in bf16) fails accuracy.
  loadPlugin(ULPCHECK_EXAMPLE_PLUGIN);
  int64_t cases = 0, statistical = 0, failing = 0;
  for (const std::string kernel : {"mylib_rmsnorm_cuda", "mylib_rmsnorm_cuda_bf16_partials"})
    for (const CaseSpec& c : judgedCases(kernel, Tier::Default, 0xb1ac, 12)) {
      const Compared r = judgeBoth(c);
      EXPECT_EQ(outcomeDifference(r.host, r.gpu), "")
          << toCaseString(c) << "\nhost: " << r.host.summary << "\ngpu:  " << r.gpu.summary;
      ++cases;
      statistical += statisticalModelHolds(c);
      failing += r.host.verdict == Verdict::Fail;
    }
  EXPECT_GT(cases, 15);
  EXPECT_GT(statistical, 5);
  EXPECT_GT(failing, 3);
}

TEST(GpuJudge, ItsOwnRunOfADeterministicVariantAgreesWithTheHost) {
  ULPCHECK_REQUIRE_GPU();
  // A case of 16 M elements (many CTAs per row loop, dW over 64 chunks and
  // every CTA order), and a few generated ones.
  std::vector<CaseSpec> cases = judgedCases("cuda_separate", Tier::Default, 0x0dd, 6);
  cases.push_back(parseCaseString("op=rmsnorm kernel=cuda_separate dtype=bf16 M=4096 N=4096"));
  const ExecContext exec = testing::cudaContext();
  const OpAdapter& op = *findOp("rmsnorm");
  for (const CaseSpec& c : cases) {
    CaseContext ctx(c, op, exec);
    const auto describe = [&](const std::string& t, int64_t r, int64_t col) { return op.describeInputs(c, t, r, col); };
    const Outcome host = judgeAccuracy(ctx.baseRun(), ctx.reference(), describe);
    const std::optional<Outcome> gpu = op.accuracyOnGpu(c, exec, nullptr);
    ASSERT_TRUE(gpu.has_value()) << toCaseString(c);
    EXPECT_EQ(outcomeDifference(host, *gpu), "") << toCaseString(c);
    EXPECT_NE(host.verdict, Verdict::Fail) << host.summary;
  }
}

/// The determinism outcome of case `text`, its repeats judged where `where` says.
Outcome determinismJudgedOn(JudgeWhere where, const std::string& text) {
  ExecContext exec = testing::cudaContext();
  exec.judge = where;
  exec.determinism_repeats = kThoroughDeterminismRepeats;
  const std::vector<ReplayResult> r = runCase(parseCaseString(text), {"determinism"}, exec, 1);
  return r.at(0).outcome;
}

TEST(GpuJudge, ANondeterministicVariantsRepeatsAreJudgedInPlace) {
  ULPCHECK_REQUIRE_GPU();
  // cuda_atomic's repeats differ in arrival-order bits only: after the first
  // differing one (downloaded, its first differing element named) the GPU
  // judges each where it ran, by digests, and calls them right as the host
  // judge does. A case of many CTAs: with 3 (7 x 8644, ctas=3) all 25 runs
  // once came out bitwise identical on the H100 under ctest -j4.
  for (const char* text : {"op=rmsnorm kernel=cuda_atomic dtype=bf16 M=1024 N=2048"})
    for (JudgeWhere where : {JudgeWhere::Gpu, JudgeWhere::Host}) {
      const Outcome o = determinismJudgedOn(where, text);
      EXPECT_EQ(o.verdict, Verdict::Expected) << judgeWhereName(where) << " " << text << ": " << o.summary;
      EXPECT_NE(o.summary.find("repeats differ, each within its accuracy budget"), std::string::npos) << o.summary;
    }
  // The race cuda_atomic first shipped with: a wrong repeat is caught in
  // place too, naming the outputs that differ. In place means a repeat that
  // differs but is right came first: 32 CTAs of one row each make right
  // repeats differ almost always and the race show in a later one (on the
  // H100 28 of 28 runs, alone and four at once, were caught in place; with
  // 7 x 8644 ctas=3 only 3 of 28 were, the rest downloaded at once).
  int in_place = 0, trials = 0;
  for (; trials < 6 && in_place == 0; ++trials) {
    const Outcome o = determinismJudgedOn(
        JudgeWhere::Gpu, "op=rmsnorm kernel=cuda_bug_atomic_partials_race dtype=fp32 M=32 N=8644 ctas=32");
    if (o.verdict != Verdict::Fail) continue;
    EXPECT_NE(o.summary.find("but is wrong"), std::string::npos) << o.summary;
    // The in-place path names the differing outputs, the other a count.
    const std::string differs = "differs from run 0 in ";
    const size_t at = o.summary.find(differs);
    ASSERT_NE(at, std::string::npos) << o.summary;
    in_place += !std::isdigit(static_cast<unsigned char>(o.summary[at + differs.size()]));
  }
  EXPECT_GT(in_place, 0) << "no wrong repeat caught in place in " << trials << " trials";
}

}  // namespace
}  // namespace ulpcheck
