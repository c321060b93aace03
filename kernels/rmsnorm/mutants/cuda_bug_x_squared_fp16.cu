// Mutant (PyTorch #133085): the forward squares x in fp16 before
// accumulating in fp32: x^2 overflows to Inf once |x| > 256, and every term
// keeps only 11 bits.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate, cuda_defects::kXSquaredInFp16>(
    "cuda_bug_x_squared_fp16", "cuda_separate whose forward rounds each x^2 to fp16", Contracts{true, true, DType::F32},
    {"x^2 computed in fp16: overflow past |x| = 256 (PyTorch #133085)", "accuracy"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
