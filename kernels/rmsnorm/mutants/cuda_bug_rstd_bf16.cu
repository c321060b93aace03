// Mutant (Helion PR #2273): the forward rounds rstd to bf16, saves it and
// normalises with it; the backward then works from the rounded rstd too.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate, cuda_defects::kRstdInBf16>(
    "cuda_bug_rstd_bf16", "cuda_separate whose forward keeps rstd in bf16", Contracts{true, true, DType::F32},
    {"rstd saved in bf16 (Helion PR #2273)", "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
