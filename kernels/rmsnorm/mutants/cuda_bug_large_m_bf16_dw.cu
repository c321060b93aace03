// Mutant (Liger-Kernel PR #950): the dispatch path taken only for M >= 32768
// summed the dW partials in bf16; no test reached it. cuda_separate otherwise.
// Caught by accuracy once the generators pair such an M with a narrow row.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_bug_large_m_bf16_dw", "cuda_separate whose dW partials are summed in bf16 when M >= 32768",
    Contracts{true, true, DType::F32},
    {"dW block reduction summed in bf16 on the large-M dispatch path only (Liger-Kernel PR #950)", "accuracy",
     cuda_defects::only(&cuda_defects::LaunchDefects::dw_bf16_at_large_m)});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
