// The Python door on the GPU: a variant run as a captured CUDA graph
// (cuda_graphs=True), right on every replay, passes every property; one wrong
// only on each graph's first replay is caught by the first-call check, named
// so, and its repro fails again.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::cli;
using testing::Result;

const std::string kGraphs = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/graph_kernels.py";

TEST(GpuPythonDoor, AVariantWrongOnlyOnItsFirstGraphReplayIsCaughtNamedAndReproduced) {
  ULPCHECK_REQUIRE_GPU();
  if (std::string(ULPCHECK_TEST_PYTHON).empty())
    GTEST_SKIP() << "no Python with torch found at configure time ($ULPCHECK_PYTHON, /usr/bin/python3)";
  setenv("ULPCHECK_PYTHON", ULPCHECK_TEST_PYTHON, 1);
  const Result right = cli("run --op fused_add_rmsnorm --kernel py_cuda_fused_add_graphs --per-cell 3 --seed 5 "
                           "--no-save --no-corpus" +
                           kGraphs);
  EXPECT_EQ(right.code, exit_code::kOk) << right.output;

  const Result r = cli("run --op fused_add_rmsnorm --kernel py_cuda_fused_add_wrong_on_first_replay --property "
                       "determinism --per-cell 5 --seed 3 --no-save --no-corpus" +
                       kGraphs);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("run 0 was py_cuda_fused_add_wrong_on_first_replay's first replay of the CUDA graph it "
                          "captured for this shape"),
            std::string::npos)
      << r.output;
  testing::expectReproFailsAgain(r.output, "first replay of the CUDA graph");
}

}  // namespace
}  // namespace ulpcheck
