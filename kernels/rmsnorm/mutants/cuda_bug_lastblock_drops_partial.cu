// Mutant: cuda_lastblock whose last CTA, on grids of more than 1024 CTAs,
// sums all partials but the last one (an off-by-one in a loop bound only the
// large-grid path reaches: narrow rows, M past 1024). One partial among
// thousands is ~1/sqrt(CTAs) of dW, within the depth bound D u sum|terms|
// at that depth (~9% of |dW| at 4224 CTAs); the bound from the partial sums
// of the declared order (oracles/column_sum.h) is ~3e-4 of |dW| and sees it.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::LastBlock, cuda_defects::kLastBlockDropsPartialOnLargeGrid>(
    "cuda_bug_lastblock_drops_partial", "cuda_lastblock leaving the last CTA's dW partial out on grids over 1024 CTAs",
    Contracts{true, true, DType::F32},
    {"one dW partial among thousands left out of the last-CTA sum on large grids (off-by-one)", "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
