// Mutant (Liger-Kernel #518; quack commit 9310d47): the forward reads the
// row's tail as one masked vector and counts its masked lanes, which load 0,
// in the variance: each adds (0 - mean)^2. Small when the mean is near 0; a
// row with x ~ 1000 (the generators' large-mean regime) makes it enormous.
#include "kernels/layernorm/layernorm_cuda.cuh"

namespace ulpcheck::layernorm_cuda {
namespace {
const bool registered = registerVariant<cuda_defects::kVarianceCountsMaskedLanes>(
    "cuda_bug_masked_lane_variance", "cuda_twopass whose variance counts the masked lanes of the row's tail vector",
    {"mean/variance include masked lanes when N is not a multiple of the vector width (Liger #518, quack 9310d47)",
     "accuracy"});
}  // namespace
}  // namespace ulpcheck::layernorm_cuda
