// Mutant (quack PR #101, first version): dW accumulated with fp32 atomicAdd
// in CTA arrival order, by a kernel that claims to be deterministic. The
// correct cuda_atomic declares the nondeterminism; this one does not, so the
// determinism property must see two runs differ.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Atomic>(
    "cuda_bug_atomic_dw", "cuda_atomic's arrival-order atomicAdd dW, claiming run-to-run determinism",
    Contracts{true, true, DType::F32, true},
    {"arrival-order (atomic) dW accumulation is nondeterministic (quack PR #101, first version)", "determinism"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
