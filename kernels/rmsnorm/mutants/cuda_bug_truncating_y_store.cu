// Mutant (aiter #5151): the forward converts y from fp32 to bf16 or fp16 by
// truncation, as CK's default conversion did, not to nearest. Every output
// leans toward zero by half an ulp on average; the accuracy check's rounding
// bias (properties/property.h, RoundingBias) names it.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate, cuda_defects::kYStoredTruncated>(
    "cuda_bug_truncating_y_store", "cuda_separate whose forward truncates y to T", Contracts{true, true, DType::F32},
    {"y converted to bf16/fp16 by truncation, not to nearest (aiter #5151)", "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
