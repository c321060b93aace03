// GPU suites: the CUDA kernels under every property (also under schedule
// perturbation), the device data generator against the host's, device red
// zones. Each test skips, saying why, when no GPU is usable.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "core/datagen.h"
#include "core/schedule_noise.h"
#if defined(ULPCHECK_HAVE_CUDA)
#include <cuda_runtime.h>

#include "tests/support/cta_placement_probe.h"
#endif
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cudaContext;
using testing::explain;
using testing::perturbedCudaContext;
using testing::replayCorpus;
using testing::runQuietly;

TEST(GpuDataGen, DeviceBitsMatchTheHost) {
  ULPCHECK_REQUIRE_GPU();
  for (DType t : kAllDTypes)
    for (int k = 0; k < static_cast<int>(Dist::kCount); ++k) {
      const DistParams d{static_cast<Dist>(k), 0.75, k == static_cast<int>(Dist::LargeMean) ? 1000.0 : 0.0};
      const int64_t rows = 37, cols = 301, ld = 304, first = 1000;
      const HostMatrix host = generateHost(
          d, t, 0xfeed, TensorStream::X,
          [&] {
            std::vector<int64_t> ids;
            for (int64_t r = 0; r < rows; ++r) ids.push_back(first + r);
            return ids;
          }(),
          cols, ld, poisonBits(t));
      Buffer dev(Backend::Cuda, size_t(rows * ld) * storageBytes(t), "generated");
      dev.fillPattern(poisonBits(t), storageBytes(t));
      generateDevice(dev.data(), d, t, 0xfeed, TensorStream::X, first, rows, cols, ld);
      deviceSynchronize("generateDevice");
      const PackedBits got = unpackBits(dev.downloadAll(), t);
      ASSERT_EQ(got, host.bits) << dtypeName(t) << " " << distName(d.kind);
    }
}

TEST(GpuDataGen, HostMatricesMadeOnTheDeviceHoldTheHostsBits) {
  // What the cuda backend does for large inputs (setGenerateOnDevice):
  // generated on the GPU and downloaded, padding columns included, a run
  // of consecutive ids at a time (a batch-invariance layout: the case's
  // rows between two runs of others; a swap: five runs); rows in no order
  // (70 runs, a reversal) stay on the host.
  ULPCHECK_REQUIRE_GPU();
  struct Restore {
    ~Restore() { setGenerateOnDevice(false); }
  } restore;
  const int64_t rows = 70, cols = 301, ld = 304;
  std::vector<int64_t> ids = identityRows(rows), shuffled = ids, embedded, reversed(ids.rbegin(), ids.rend());
  for (int64_t& id : ids) id += 500;
  std::swap(shuffled[3], shuffled[40]);
  for (int64_t pos = 0; pos < rows; ++pos)  // as batch_invariance.cpp places 50 rows at offset 7
    embedded.push_back(pos >= 7 && pos < 57 ? pos - 7 : 50 + pos);
  ASSERT_GE(rows * cols, kDeviceGenerationElements);
  for (DType t : kAllDTypes)
    for (int k = 0; k < static_cast<int>(Dist::kCount); ++k)
      for (const std::vector<int64_t>* rows_of : {&ids, &shuffled, &embedded, &reversed}) {
        const DistParams d{static_cast<Dist>(k), 0.75, k == static_cast<int>(Dist::LargeMean) ? 1000.0 : 0.0};
        setGenerateOnDevice(false);
        const HostMatrix host = generateHost(d, t, 0xfeed, TensorStream::GradOut, *rows_of, cols, ld, poisonBits(t));
        setGenerateOnDevice(true);
        const HostMatrix made = generateHost(d, t, 0xfeed, TensorStream::GradOut, *rows_of, cols, ld, poisonBits(t));
        ASSERT_EQ(made.bits, host.bits) << dtypeName(t) << " " << distName(d.kind);
        ASSERT_EQ(made.bits.width(), host.bits.width());
      }
}

#if defined(ULPCHECK_HAVE_CUDA)
TEST(GpuBuffer, RedZonesCatchDeviceWrites) {
  ULPCHECK_REQUIRE_GPU();
  Buffer b(Backend::Cuda, 1000, "t");
  b.fillPattern(poisonBits(DType::F32), 4);
  EXPECT_EQ(b.damagedCanaryBytes(), 0u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(b.data()) + 1000, 1, 1), cudaSuccess);  // one past the end
  EXPECT_EQ(b.damagedCanaryBytes(), 1u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(b.data()) - 2, 1, 2), cudaSuccess);  // before the start
  EXPECT_EQ(b.damagedCanaryBytes(), 3u);
}
#endif

TEST(CudaKernels, EveryCorrectVariantPassesEveryPropertyOnSmokeCases) {
  ULPCHECK_REQUIRE_GPU();
  const auto kernels = testing::correctKernels(Backend::Cuda);
  EXPECT_GE(kernels.size(), 7u) << "rmsnorm's three dW strategies, layernorm, allreduce_rmsnorm's three pipelines";
  for (const auto& k : kernels) {
    const CampaignResult r = runQuietly(k, 300, 0x6a7, Tier::Smoke, cudaContext());
    testing::expectPassedAndJudged(r, k, 150);
    EXPECT_EQ(r.cells.size(), r.judged.size() * 3u) << k;
  }
}

TEST(CudaKernels, EveryCorrectVariantPassesEveryPropertyOnDefaultTierCases) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : testing::correctKernels(Backend::Cuda)) {
    const CampaignResult r = runQuietly(k, 100, 0xdefa17, Tier::Default, cudaContext());
    testing::expectPassedAndJudged(r, k, 50);
  }
}

TEST(CudaKernels, CasesCheckedAtOnceGiveTheResultsOfOneAtATime) {
  ULPCHECK_REQUIRE_GPU();
  // Each case on its own thread and per-thread default stream, beside the
  // others' kernels and schedule-perturbing loads: the same results as one
  // case at a time, for every op (correct variants, one nondeterministic by
  // contract, and mutants whose first failure makes later checks moot).
  const std::vector<std::pair<std::string, std::vector<std::string>>> campaigns{
      {"rmsnorm", {"cuda_separate", "cuda_atomic", "cuda_bug_x_squared_fp16", "cuda_bug_threads_from_m"}},
      {"layernorm", {"cuda_twopass", "cuda_bug_one_pass_variance"}},
      {"allreduce_rmsnorm", {"cuda_fused_oneshot", "cuda_bug_no_round_trip"}}};
  for (const auto& [op, kernels] : campaigns) {
    CampaignOptions o = testing::hermeticCampaign(kernels, 150, 0xc0c1, Tier::Smoke);
    o.shrink_budget_s = 5;
    const auto [one, many] = testing::expectSameResultsAtOnce(o, cudaContext(), 8);
    EXPECT_EQ(one.cases_run, 150) << op;
    EXPECT_FALSE(one.failures.empty()) << op << ": its mutants fail\n" << explain(one);
  }
}

TEST(CudaMutants, KillMatrixKillsEachByItsDeclaredPropertyAndShrinks) {
  ULPCHECK_REQUIRE_GPU();
  const KillMatrix m = testing::ciKillMatrix(Backend::Cuda, cudaContext());
  EXPECT_GE(m.rows.size(), 13u);
  testing::expectEveryMutantKilledAndShrunk(m);
  std::cout << formatKillMatrix(m);
}

TEST(CudaKernels, AtomicVariantsNondeterminismIsObservedAndExpected) {
  ULPCHECK_REQUIRE_GPU();
  const CampaignResult r = runQuietly("cuda_atomic", 150, 0xa70, Tier::Default, cudaContext(), {"determinism"});
  EXPECT_TRUE(r.failures.empty()) << explain(r);
  int64_t expected = 0;
  for (const auto& [key, cell] : r.cells) expected += cell.expected;
  EXPECT_GT(expected, 0) << "atomicAdd in arrival order must be seen to differ between runs\n" << explain(r);
}

#if defined(ULPCHECK_HAVE_CUDA)
TEST(CudaSchedulePerturbation, CtasLandOnDifferentSmsFromRunToRun) {
  ULPCHECK_REQUIRE_GPU();
  const int sm_count = queryDevice().sm_count;
  testing::CtaPlacementProbe probe(4 * sm_count);
  constexpr int kRuns = 10;
  std::set<std::vector<int>> placements;
  for (int run = 0; run < kRuns; ++run) {
    ScheduleNoise noise(true, Backend::Cuda, sm_count);
    placements.insert(probe.run());
  }
  // An idle H100 repeats a handful of placements (3 distinct in 50 runs);
  // under the load nearly every run differs.
  EXPECT_GE(placements.size(), size_t(kRuns / 2)) << "distinct CTA-to-SM placements in " << kRuns << " runs";
}
#endif

TEST(CudaSchedulePerturbation, DeterministicVariantsStayBitwiseIdentical) {
  ULPCHECK_REQUIRE_GPU();
  std::vector<std::string> deterministic;
  for (const auto& k : testing::correctKernels(Backend::Cuda))
    if (OpAdapter::findKernel(testing::opOf(k), k)->contracts.deterministic) deterministic.push_back(k);
  EXPECT_GE(deterministic.size(), 2u) << "rmsnorm's cuda_separate and cuda_lastblock at least";
  for (const auto& k : deterministic) {
    const CampaignResult r = runQuietly(k, 150, 0x5c4ed, Tier::Default, perturbedCudaContext(), {"determinism"});
    testing::expectPassedAndJudged(r, k, 100);
  }
}

TEST(CudaSchedulePerturbation, AtomicVariantsNondeterminismIsObservedAndExpected) {
  ULPCHECK_REQUIRE_GPU();
  const CampaignResult r = runQuietly("cuda_atomic", 150, 0x5c4ed, Tier::Default, perturbedCudaContext(),
                                      {"determinism"});
  EXPECT_TRUE(r.failures.empty()) << explain(r);
  EXPECT_TRUE(r.fatal_error.empty()) << r.fatal_error;
  int64_t expected = 0;
  for (const auto& [key, cell] : r.cells) expected += cell.expected;
  EXPECT_GT(expected, 0) << "atomicAdd in arrival order must be seen to differ between perturbed runs\n" << explain(r);
}

TEST(CudaSchedulePerturbation, DeterminismOutcomeSaysWhetherTheScheduleWasPerturbed) {
  ULPCHECK_REQUIRE_GPU();
  const CaseSpec spec = parseCaseString("op=rmsnorm kernel=cuda_separate dtype=fp32 M=64 N=1024");
  const auto perturbed = runCase(spec, {"determinism"}, perturbedCudaContext());
  ASSERT_EQ(perturbed.size(), 1u);
  EXPECT_EQ(perturbed[0].outcome.verdict, Verdict::Pass) << perturbed[0].outcome.summary;
  EXPECT_NE(perturbed[0].outcome.summary.find("(schedule perturbed)"), std::string::npos)
      << perturbed[0].outcome.summary;
  // Without the flag only the last repeats are perturbed, and it says so.
  const auto plain = runCase(spec, {"determinism"}, cudaContext());
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].outcome.summary.find("(schedule perturbed)"), std::string::npos) << plain[0].outcome.summary;
  EXPECT_NE(plain[0].outcome.summary.find("(runs from 2 on schedule perturbed)"), std::string::npos)
      << plain[0].outcome.summary;
}

TEST(CudaKernels, RegressionCorpusReplaysOnEveryCorrectVariant) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : testing::correctKernels(Backend::Cuda)) {
    const CampaignResult r = replayCorpus(k, cudaContext());
    EXPECT_GT(r.regression_cases, 0);
    EXPECT_TRUE(r.failures.empty()) << k << "\n" << explain(r);
  }
}

}  // namespace
}  // namespace ulpcheck
