// Mutant (PyTorch PR #192016): the dW partials scratch is sized from N where
// the CTA count, which M decides, belongs. With M > N the backward's CTAs
// write partial rows past the end of the workspace: memory_safety's red
// zones must see it.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_bug_scratch_sized_by_n", "cuda_separate whose workspace holds min(N, max CTAs) partial rows, not one per CTA",
    Contracts{true, true, DType::F32},
    {"scratch buffer sized by N instead of M on the large-M path: out-of-bounds write (PyTorch PR #192016)",
     "memory_safety", cuda_defects::only(&cuda_defects::LaunchDefects::scratch_sized_by_n)});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
