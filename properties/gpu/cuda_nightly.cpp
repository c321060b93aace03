// Nightly GPU tier: the largest shapes (M up to 131072, N up to 131072).
#include <gtest/gtest.h>

#include "properties/test_support.h"

namespace ulpcheck {
namespace {

TEST(CudaKernelsNightly, EveryCorrectVariantPassesEveryPropertyOnNightlyShapes) {
  ULPCHECK_REQUIRE_GPU();
  for (const auto& k : testing::correctKernels(Backend::Cuda)) {
    const CampaignResult r = testing::runQuietly(k, 30, 0x4e1, Tier::Nightly, testing::cudaContext());
    EXPECT_TRUE(r.failures.empty()) << k << "\n" << testing::explain(r);
  }
}

}  // namespace
}  // namespace ulpcheck
