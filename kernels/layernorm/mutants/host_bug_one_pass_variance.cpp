// Mutant: the host mirror of cuda_bug_one_pass_variance: the variance as
// E[x^2] - E[x]^2 in fp32 (PyTorch #51102, TVM PR #19643, onnxruntime
// #28463), which has no correct digit once |mean| / std nears 2^12. Must be
// caught by accuracy on large-mean rows.
#include "kernels/layernorm/layernorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = layernorm_host::registerMutant(
    "host_bug_one_pass_variance", "host_twopass whose variance is E[x^2] - E[x]^2 from one pass",
    "one-pass variance E[x^2] - E[x]^2 cancels on large-mean rows (PyTorch #51102, TVM PR #19643, onnxruntime #28463)",
    "accuracy", {.one_pass_variance = true});
}  // namespace
}  // namespace ulpcheck
