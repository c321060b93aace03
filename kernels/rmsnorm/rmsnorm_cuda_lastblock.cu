// cuda_lastblock: dW finished inside the backward kernel. Each CTA writes its
// fp32 partial, fences, and takes an atomic ticket; the last CTA to arrive
// sums every partial in CTA order (deterministic, no second launch; quack
// PR #109's "last CTA reduces").
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = RmsNormRegistry::add(RmsNormKernel{
    KernelInfo{"rmsnorm", "cuda_lastblock", Backend::Cuda, {DType::F32, DType::F16, DType::BF16},
               Contracts{true, true, DType::F32},
               "cuda_separate's backward with a fused last-CTA dW reduction (threadfence + atomic ticket, CTA order)",
               "", ""},
    workspaceBytes, forward, launchBackward<DwStrategy::LastBlock>,
    [](const RmsNormShape& s, const LaunchEnv& e) { return depths(s, e, DwStrategy::LastBlock); }});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
