// Mutant (vLLM PR #54111): the per-token or per-group |y| max is gathered
// across warps in shared memory and read with no barrier after the warps'
// updates. A warp that reads first takes a partial max: a smaller scale, so
// larger codes (saturated or non-finite past the range) and a wrong stored
// scale, varying with the warps' timing. Where a group lies within one warp
// (64 or 128 columns of 16-bit vectors), that warp's own updates come first
// and the race is hidden; a token's scale spans every warp of the row.
#include "kernels/rmsnorm_quant/rmsnorm_quant_cuda.cuh"

namespace ulpcheck::rmsnorm_quant_cuda {
namespace {
const bool registered = registerVariant<cuda_defects::kGroupMaxReadWithoutBarrier>(
    "cuda_bug_group_max_without_barrier", "cuda_rmsnorm_quant reading its group maxima with no barrier",
    {"shared-memory race in the scale's max reduction: no barrier before the read (vLLM PR #54111)", "determinism"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_quant_cuda
