// Mutant (torch-xpu-ops PR #4790): in one shape regime (here M >= 256) the
// backward writes dgamma's column sums to dbeta and dbeta's to dgamma. Every
// test at smaller M passes.
#include "kernels/layernorm/layernorm_cuda.cuh"

namespace ulpcheck::layernorm_cuda {
namespace {
const bool registered = registerVariant(
    "cuda_bug_swap_dgamma_dbeta", "cuda_twopass whose backward swaps dgamma and dbeta when M >= 256",
    {"dgamma and dbeta swapped in one shape regime (torch-xpu-ops PR #4790)", "accuracy",
     cuda_defects::only(&cuda_defects::LaunchDefects::swap_dgamma_dbeta_at_large_m)});
}  // namespace
}  // namespace ulpcheck::layernorm_cuda
