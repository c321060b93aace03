// Nightly CPU tier: many more default-size cases on the host port.
#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

TEST(HostPortNightly, EveryCorrectVariantPassesEveryPropertyOnManyDefaultTierCases) {
  for (const auto& k : testing::correctKernels(Backend::Host)) {
    const CampaignResult r = testing::runQuietly(k, 200, 0x4e1, Tier::Default, testing::hostContext());
    testing::expectPassedAndJudged(r, k, 100);
  }
}

}  // namespace
}  // namespace ulpcheck
