// Fault isolation on the GPU (issue "your kernel under test", §2): a plugin
// kernel that stores to an illegal address (a sticky error that ends its
// CUDA context) or spins past --case-timeout in one shape regime is a
// failing case with a repro, its worker is restarted, and the other cases
// of the same run are still judged; an output element a torch kernel never
// wrote is caught.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

using testing::expectFaultIsolated;

std::function<bool(int64_t)> atNModulo64(int64_t r) {
  return [r](int64_t N) { return N % 64 == r; };
}

TEST(GpuPluginFaults, AnIllegalAddressIsAFailingCaseAndTheRunGoesOn) {
  ULPCHECK_REQUIRE_GPU();
  expectFaultIsolated(ULPCHECK_FAULTY_CUDA_PLUGIN, "gpu_rmsnorm_illegal_address_at_n5", atNModulo64(5),
                      "illegal memory access", "--tier default --case-timeout 60");
}

TEST(GpuPluginFaults, AKernelSpinningPastTheCaseTimeoutIsAFailingCaseAndTheRunGoesOn) {
  ULPCHECK_REQUIRE_GPU();
  expectFaultIsolated(ULPCHECK_FAULTY_CUDA_PLUGIN, "gpu_rmsnorm_spins_at_n7", atNModulo64(7),
                      "did not return within 10 s", "--tier default --case-timeout 10", exit_code::kHang);
}

TEST(GpuPythonDoor, AnOutputElementATorchKernelNeverWroteIsCaught) {
  // The library allocates dx itself (torch.empty_like from the caching
  // allocator) and never writes its column 0. The worker poisons the
  // allocator's cache before the call, but the caching allocator hands
  // empty_like the block of a temporary the same call freed (autograd's copy
  // of x): seen on the H100, column 0 came back holding x. So the elements
  // are caught as wrong values (every one of them), not labelled never
  // written; what the library's own allocations held before cannot be
  // controlled from outside.
  ULPCHECK_REQUIRE_GPU();
  if (std::string(ULPCHECK_TEST_PYTHON).empty())
    GTEST_SKIP() << "no Python with torch found at configure time ($ULPCHECK_PYTHON, /usr/bin/python3)";
  setenv("ULPCHECK_PYTHON", ULPCHECK_TEST_PYTHON, 1);
  const testing::Result r = testing::cli(
      "repro 'op=rmsnorm kernel=py_cuda_rms_column_0_unwritten dtype=fp32 M=64 N=33' --property accuracy --python " +
      std::string(ULPCHECK_SOURCE_DIR) + "/tests/plugins/faulty_kernels.py");
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("64 elements over budget; worst dx["), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ulpcheck
