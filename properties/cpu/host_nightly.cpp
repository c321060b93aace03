// Nightly CPU tier: many more default-size cases on the host port.
#include <gtest/gtest.h>

#include "properties/test_support.h"

namespace ulpcheck {
namespace {

TEST(HostPortNightly, PassesEveryPropertyOnManyDefaultTierCases) {
  const CampaignResult r = testing::runQuietly("host_separate", 400, 0x4e1, Tier::Default, testing::hostContext());
  EXPECT_TRUE(r.failures.empty()) << testing::explain(r);
}

}  // namespace
}  // namespace ulpcheck
