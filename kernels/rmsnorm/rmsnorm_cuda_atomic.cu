// cuda_atomic: each CTA atomically adds its fp32 dW partial into one fp32 dW
// (quack PR #101's bulk reduce-add, before the semaphore): one launch less,
// but the sum's order, and so its bits, depend on CTA arrival. The contract
// says so: the determinism property reports what it observes as expected.
// fp32 global atomics also flush subnormals to zero (PTX red/atom.add.f32);
// ulpcheck found that on its first GPU run (dW of subnormal inputs came back
// 0), so the contract declares it and the budget allows it.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
template void launchBackward<DwStrategy::Atomic, cuda_defects::kNone>(const RmsNormBackwardArgs&, const LaunchEnv&,
                                                                      const cuda_defects::LaunchDefects&);
namespace {
const bool registered = registerVariant<DwStrategy::Atomic>(
    "cuda_atomic",
    "cuda_separate's backward with dW accumulated by fp32 atomicAdd in CTA arrival order (nondeterministic)",
    Contracts{false, true, DType::F32, true});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
