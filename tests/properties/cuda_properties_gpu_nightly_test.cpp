// Nightly GPU tier: the largest shapes (M up to 131072, N up to 131072).
#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

TEST(CudaKernelsNightly, EveryCorrectVariantPassesEveryPropertyOnNightlyShapes) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : testing::correctKernels(Backend::Cuda)) {
    const CampaignResult r = testing::runQuietly(k, 30, 0x4e1, Tier::Nightly, testing::cudaContext());
    // Judged, not skipped: the largest shapes must fit the GPU, not vanish from the run.
    testing::expectPassedAndJudged(r, k, 10);
  }
}

}  // namespace
}  // namespace ulpcheck
