// Mutant: the variance in one pass, E[x^2] - E[x]^2 in fp32 (PyTorch #51102
// saw torch.nn.LayerNorm fail at mean 2000; TVM PR #19643 and onnxruntime
// #28463 fixed the same formula). The two terms are both ~mean^2, so at
// |mean| / std ~ 2^12 their difference has no correct digit, and rstd, y and
// dx follow it. Must be caught by accuracy on large-mean rows.
#include "kernels/layernorm/layernorm_cuda.cuh"

namespace ulpcheck::layernorm_cuda {
namespace {
const bool registered = registerVariant<cuda_defects::kOnePassVariance>(
    "cuda_bug_one_pass_variance", "cuda_twopass whose variance is E[x^2] - E[x]^2 from one pass",
    {"one-pass variance E[x^2] - E[x]^2 cancels on large-mean rows (PyTorch #51102, TVM PR #19643, onnxruntime "
     "#28463)",
     "accuracy"});
}  // namespace
}  // namespace ulpcheck::layernorm_cuda
