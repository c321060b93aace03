// GPU suites: the CUDA kernels under every property, the device data
// generator against the host's, device red zones. Each test skips, saying
// why, when no GPU is usable.
#include <gtest/gtest.h>

#include "harness/core/datagen.h"
#if defined(ULPCHECK_HAVE_CUDA)
#include <cuda_runtime.h>
#endif
#include "properties/test_support.h"

namespace ulpcheck {
namespace {

using testing::cudaContext;
using testing::explain;
using testing::replayCorpus;
using testing::runQuietly;

TEST(GpuDataGen, DeviceBitsMatchTheHost) {
  ULPCHECK_REQUIRE_GPU();
  for (DType t : kAllDTypes)
    for (int k = 0; k < static_cast<int>(Dist::kCount); ++k) {
      const DistParams d{static_cast<Dist>(k), 0.75, k == static_cast<int>(Dist::LargeMean) ? 1000.0 : 0.0};
      const int64_t rows = 37, cols = 301, ld = 304, first = 1000;
      const HostMatrix host = generateHost(d, t, 0xfeed, TensorStream::X, [&] {
        std::vector<int64_t> ids;
        for (int64_t r = 0; r < rows; ++r) ids.push_back(first + r);
        return ids;
      }(), cols, ld, poisonBits(t));
      Buffer dev(Backend::Cuda, size_t(rows * ld) * storageBytes(t), "generated");
      dev.fillPattern(poisonBits(t), storageBytes(t));
      generateDevice(dev.data(), d, t, 0xfeed, TensorStream::X, first, rows, cols, ld);
      deviceSynchronize("generateDevice");
      const std::vector<uint32_t> got = unpackBits(dev.downloadAll(), t);
      ASSERT_EQ(got, host.bits) << dtypeName(t) << " " << distName(d.kind);
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
  const auto kernels = defaultKernels("rmsnorm", Backend::Cuda);
  EXPECT_GE(kernels.size(), 3u);
  for (const auto& k : kernels) {
    const CampaignResult r = runQuietly(k, 300, 0x6a7, Tier::Smoke, cudaContext());
    EXPECT_TRUE(r.failures.empty()) << k << "\n" << explain(r);
    EXPECT_TRUE(r.fatal_error.empty()) << r.fatal_error;
    EXPECT_EQ(r.cells.size(), 4u * 3u) << k;
  }
}

TEST(CudaKernels, EveryCorrectVariantPassesEveryPropertyOnDefaultTierCases) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : defaultKernels("rmsnorm", Backend::Cuda)) {
    const CampaignResult r = runQuietly(k, 100, 0xdefa17, Tier::Default, cudaContext());
    EXPECT_TRUE(r.failures.empty()) << k << "\n" << explain(r);
  }
}

TEST(CudaKernels, AtomicVariantsNondeterminismIsObservedAndExpected) {
  ULPCHECK_REQUIRE_GPU();
  const CampaignResult r = runQuietly("cuda_atomic", 150, 0xa70, Tier::Default, cudaContext(), {"determinism"});
  EXPECT_TRUE(r.failures.empty()) << explain(r);
  int64_t expected = 0;
  for (const auto& [key, cell] : r.cells) expected += cell.expected;
  EXPECT_GT(expected, 0) << "atomicAdd in arrival order must be seen to differ between runs\n" << explain(r);
}

TEST(CudaKernels, RegressionCorpusReplaysOnEveryCorrectVariant) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : defaultKernels("rmsnorm", Backend::Cuda)) {
    const CampaignResult r = replayCorpus(k, cudaContext());
    EXPECT_GT(r.regression_cases, 0);
    EXPECT_TRUE(r.failures.empty()) << k << "\n" << explain(r);
  }
}

}  // namespace
}  // namespace ulpcheck
