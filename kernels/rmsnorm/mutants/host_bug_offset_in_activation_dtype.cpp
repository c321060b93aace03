// Mutant: the Gemma weight offset added in the activation dtype: 1 + w
// rounded to bf16/fp16 before it multiplies x-hat, where Gemma's spec forms
// 1 + w.float() in fp32 (a reviewer of vLLM PR #29810 showed bf16 1 + 15.8125
// = 16.75 against 16.8125). Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_offset_in_activation_dtype", "host port forming offset + w in the activation dtype",
    "Gemma weight offset added in the activation dtype instead of fp32 (vLLM PR #29810 review)", "accuracy",
    {.offset_in_activation_dtype = true});
}  // namespace
}  // namespace ulpcheck
