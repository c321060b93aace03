// Mutant (vLLM #48271): the forward picks its CTA size from the number of
// tokens ("max_block_size = num_tokens < 256 ? 1024 : 256"), so the same row
// is reduced in a different order alone than in a batch of 256 or more.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_bug_threads_from_m", "cuda_separate whose forward caps the CTA at 256 threads once M >= 256",
    Contracts{true, true, DType::F32},
    {"block size chosen by M changes the reduction order (vLLM #48271)", "batch_invariance",
     cuda_defects::only(&cuda_defects::LaunchDefects::threads_from_m)});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
