// Nightly GPU tier: the largest shapes (M up to 131072, N up to 131072).
#include <gtest/gtest.h>

#include "properties/test_support.h"

namespace ulpcheck {
namespace {

TEST(CudaSeparateNightly, PassesEveryPropertyOnNightlyShapes) {
  ULPCHECK_REQUIRE_GPU();
  const CampaignResult r = testing::runQuietly("cuda_separate", 60, 0x4e1, Tier::Nightly, testing::cudaContext());
  EXPECT_TRUE(r.failures.empty()) << testing::explain(r);
}

}  // namespace
}  // namespace ulpcheck
