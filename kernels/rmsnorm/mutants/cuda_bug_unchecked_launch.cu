// Mutant (Paddle PR #74055): the backward's CTA size comes from the row
// alone, past the kernel's 512-thread launch bound for wide rows, and no
// launch is checked. Those launches fail, dx is never written, and nothing
// says so: the harness must (memory_safety sees the unwritten outputs and
// the launch error nobody read).
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_bug_unchecked_launch", "cuda_separate with uncapped backward CTAs and no launch error checks",
    Contracts{true, true, DType::F32},
    {"kernel launch failure left unchecked: the output is never written (Paddle PR #74055)", "memory_safety",
     cuda_defects::only(&cuda_defects::LaunchDefects::unchecked_launch)});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
