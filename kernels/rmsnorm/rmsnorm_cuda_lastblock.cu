// cuda_lastblock: dW finished inside the backward kernel. Each CTA writes its
// fp32 partial, fences, and takes an atomic ticket; the last CTA to arrive
// sums every partial in CTA order (deterministic, no second launch; quack
// PR #109's "last CTA reduces").
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
template void launchBackward<DwStrategy::LastBlock, cuda_defects::kNone>(const RmsNormBackwardArgs&, const LaunchEnv&,
                                                                         const cuda_defects::LaunchDefects&);
namespace {
const bool registered = registerVariant<DwStrategy::LastBlock>(
    "cuda_lastblock",
    "cuda_separate's backward with a fused last-CTA dW reduction (threadfence + atomic ticket, CTA order)",
    Contracts{true, true, DType::F32});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
