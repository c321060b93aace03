// The baseline checkers (harness/runner/baselines.cpp) model other projects'
// tolerance tests. They must pass every correct variant, or the kill matrix's
// comparison would credit them with catches that are false alarms.
#include <gtest/gtest.h>

#include "harness/runner/baselines.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

TEST(Baselines, PassEveryCorrectHostVariant) {
  for (const std::string& name : testing::correctKernels(Backend::Host)) {
    const KernelInfo* k = OpAdapter::findKernel(testing::opOf(name), name);
    ASSERT_NE(k, nullptr) << name;
    for (const Baseline& b : baselines()) {
      const BaselineVerdict v = runBaseline(b, *k, testing::hostContext());
      EXPECT_FALSE(v.caught) << b.name << " rejects the correct " << name << ": " << v.detail;
    }
  }
}

TEST(Baselines, EachTestsSomeOp) {
  for (const Baseline& b : baselines()) {
    bool any = false;
    for (const OpAdapter* op : opRegistry()) any |= !baselineCases(b, *op).empty();
    EXPECT_TRUE(any) << b.name;
  }
}

}  // namespace
}  // namespace ulpcheck
