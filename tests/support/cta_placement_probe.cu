#include "tests/support/cta_placement_probe.h"

#include <cstring>

#include "core/cuda_check.h"

namespace ulpcheck::testing {

namespace {

// Long enough that a wave of CTAs is resident together, as a real kernel's
// would be, so later CTAs go wherever SMs free up.
constexpr long long kResidentCycles = 2000;

__global__ void recordSmIds(int* sm_ids) {
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_ids[blockIdx.x] = static_cast<int>(sm);
  }
  const long long start = clock64();
  while (clock64() - start < kResidentCycles) {
  }
}

}  // namespace

CtaPlacementProbe::CtaPlacementProbe(int ctas) : ctas_(ctas), sm_ids_(Backend::Cuda, sizeof(int) * ctas, "sm_ids") {}

std::vector<int> CtaPlacementProbe::run() {
  recordSmIds<<<ctas_, 256>>>(static_cast<int*>(sm_ids_.data()));
  ULPCHECK_CUDA_LAUNCH("recordSmIds");
  const std::vector<uint8_t> bytes = sm_ids_.downloadAll();
  std::vector<int> sm_ids(ctas_);
  std::memcpy(sm_ids.data(), bytes.data(), bytes.size());
  return sm_ids;
}

}  // namespace ulpcheck::testing
