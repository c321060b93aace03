// Mutant: the Gemma weight offset added in the activation dtype, 1 + w
// rounded to bf16/fp16 before it multiplies x-hat (forward) and dy
// (backward), where Gemma's spec forms 1 + w.float() in fp32; a reviewer of
// vLLM PR #29810 showed bf16 1 + 15.8125 = 16.75, not 16.8125.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate, cuda_defects::kOffsetInActivationDtype>(
    "cuda_bug_offset_in_activation_dtype", "cuda_separate forming offset + w in the activation dtype",
    Contracts{true, true, DType::F32},
    {"Gemma weight offset added in the activation dtype instead of fp32 (vLLM PR #29810 review)", "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
