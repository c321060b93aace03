// Mutant: the backward's block reduction keeps one shared slot for its two
// back-to-back row sums (sum a, then sum a xhat) and has no __syncthreads
// between the first sum's reads and the second's writes. A warp that has
// read the first sum writes its second partial into the slot while slower
// warps are still adding up the first: they get a mixture, and dx goes wrong
// by an amount that changes from run to run. A shared-memory race: rare on
// an idle GPU, where the warps leave the barrier together; determinism's
// perturbed repeats make it show.
#include "kernels/layernorm/layernorm_cuda.cuh"

namespace ulpcheck::layernorm_cuda {
namespace {
const bool registered = registerVariant<cuda_defects::kReductionSlotReusedWithoutBarrier>(
    "cuda_bug_missing_syncthreads", "cuda_twopass whose backward reuses one reduction slot with no barrier",
    {"missing __syncthreads in the block reduction: shared-memory race", "determinism"});
}  // namespace
}  // namespace ulpcheck::layernorm_cuda
