// Mutant (quack #88): the kernels address row i at i * N, not i * ld, so a
// non-contiguous (padded, sliced) input is read and written as if packed.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_bug_ignore_row_stride", "cuda_separate launched with row stride N whatever the tensors' ld",
    Contracts{true, true, DType::F32},
    {"row stride ignored for non-contiguous input (quack #88)", "accuracy",
     cuda_defects::only(&cuda_defects::LaunchDefects::ignore_row_stride)});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
