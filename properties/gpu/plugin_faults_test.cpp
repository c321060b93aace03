// Fault isolation on the GPU (issue "your kernel under test", §2): a plugin
// kernel that stores to an illegal address (a sticky error that ends its
// CUDA context) or spins past --case-timeout in one shape regime is a
// failing case with a repro, its worker is restarted, and the other cases
// of the same run are still judged.
#include <gtest/gtest.h>

#include "properties/cpu/cli_support.h"
#include "properties/test_support.h"

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
  expectFaultIsolated(ULPCHECK_FAULTY_CUDA_PLUGIN, "gpu_rmsnorm_spins_at_n7", atNModulo64(7), "did not return within 10 s",
                      "--tier default --case-timeout 10");
}

}  // namespace
}  // namespace ulpcheck
