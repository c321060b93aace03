// The main job (`ulpcheck run`, every op) on a GPU: an op with no CUDA
// variant yet (rmsnorm_quant's host port only) is passed over, saying so,
// not an error that stops the job; named alone it is one.
#include <gtest/gtest.h>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cli;

TEST(GpuMainJob, AnOpWithoutACudaVariantIsPassedOverSayingSo) {
  ULPCHECK_REQUIRE_GPU();
  const auto all = cli("run --backend cuda --tier smoke --cases 6 --seed 0x2a11 --no-corpus --no-save");
  EXPECT_EQ(all.code, exit_code::kOk) << all.output;
  EXPECT_NE(all.output.find("# op rmsnorm_quant: no cuda kernel variant is registered; passed over"), std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("# op rmsnorm |"), std::string::npos) << "the other ops ran\n" << all.output;
  const auto alone = cli("run --backend cuda --op rmsnorm_quant --cases 6 --no-corpus --no-save");
  EXPECT_EQ(alone.code, exit_code::kUsage) << alone.output;
  EXPECT_NE(alone.output.find("no cuda kernel variant of 'rmsnorm_quant' is registered"), std::string::npos)
      << alone.output;
}

}  // namespace
}  // namespace ulpcheck
