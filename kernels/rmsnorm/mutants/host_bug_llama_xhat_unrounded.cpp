// Mutant: under rounding=llama the port multiplies the weight by x-hat as
// computed in fp32, never rounding it to the activation dtype first — vLLM
// PR #42379 (issue #42325): its RMSNorm kernel multiplied in fp32 where its
// spec (vllm/ir/ops/layernorm.py: x.to(weight.dtype) * weight) rounds first;
// max diff 3e-2 per layer, compounding over Q/K norms. Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_llama_xhat_unrounded", "host port multiplying the unrounded x-hat by the weight under rounding=llama",
    "weight multiplied in fp32 where the spec rounds x-hat to the activation dtype first (vLLM PR #42379)", "accuracy",
    {.llama_xhat_unrounded = true});
}  // namespace
}  // namespace ulpcheck
