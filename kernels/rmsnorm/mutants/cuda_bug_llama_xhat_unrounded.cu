// Mutant (vLLM PR #42379, issue #42325): under rounding=llama the weight
// multiplies x-hat as computed in fp32; the spec (vllm/ir/ops/layernorm.py:
// x.to(weight.dtype) * weight) rounds x-hat to the activation dtype first.
// vLLM's regressed kernel was off by 3e-2 per layer, compounding over Q/K
// norms. The dW partials take the unrounded x-hat too.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate, cuda_defects::kLlamaXhatUnrounded>(
    "cuda_bug_llama_xhat_unrounded", "cuda_separate multiplying the unrounded x-hat by the weight under rounding=llama",
    Contracts{true, true, DType::F32},
    {"weight multiplied in fp32 where the spec rounds x-hat to the activation dtype first (vLLM PR #42379)",
     "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
