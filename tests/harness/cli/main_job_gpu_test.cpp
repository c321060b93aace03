// The main job (`ulpcheck run`, every op) on a GPU: every op with a CUDA
// variant runs; an op with none yet (a new op's host port only) is passed
// over, saying so, not an error that stops the job; named alone it is one.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/runner/exit_codes.h"
#include "properties/op.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cli;

bool hasCudaVariant(const OpAdapter& op) {
  const std::vector<KernelInfo> kernels = op.kernels();
  return std::any_of(kernels.begin(), kernels.end(), [](const KernelInfo& k) { return k.backend == Backend::Cuda; });
}

TEST(GpuMainJob, EveryOpWithACudaVariantRunsAndAnOpWithoutOneIsPassedOverSayingSo) {
  ULPCHECK_REQUIRE_GPU();
  const auto all = cli("run --backend cuda --tier smoke --cases 6 --seed 0x2a11 --no-corpus --no-save");
  EXPECT_EQ(all.code, exit_code::kOk) << all.output;
  std::string without;
  for (const OpAdapter* op : opRegistry()) {
    if (hasCudaVariant(*op)) {
      EXPECT_NE(all.output.find("# op " + op->name() + " |"), std::string::npos) << op->name() << "\n" << all.output;
      continue;
    }
    without = op->name();
    EXPECT_NE(all.output.find("# op " + without + ": no cuda kernel variant is registered; passed over"),
              std::string::npos)
        << all.output;
  }
  if (without.empty()) GTEST_SKIP() << "every op has a CUDA variant: no op to pass over";
  const auto alone = cli("run --backend cuda --op " + without + " --cases 6 --no-corpus --no-save");
  EXPECT_EQ(alone.code, exit_code::kUsage) << alone.output;
  EXPECT_NE(alone.output.find("no cuda kernel variant of '" + without + "' is registered"), std::string::npos)
      << alone.output;
}

}  // namespace
}  // namespace ulpcheck
