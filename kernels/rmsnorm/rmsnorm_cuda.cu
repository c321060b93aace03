// CUDA RMSNorm, written the way production kernels are: 128-bit vectorised
// loads and stores, fp32 accumulation, warp-shuffle plus shared-memory block
// reductions (rmsnorm_forward.cuh, rmsnorm_cuda_backward.cuh). This file
// compiles the correct forward, which every CUDA variant without a forward
// defect shares, and registers cuda_separate: dW through per-CTA fp32
// partials summed by a second kernel in a fixed order (deterministic, batch
// invariant).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"
#include "kernels/rmsnorm/rmsnorm_forward.cuh"

namespace ulpcheck::rmsnorm_cuda {

template void forward<cuda_defects::kNone>(const RmsNormForwardArgs&, const LaunchEnv&,
                                           const cuda_defects::LaunchDefects&);
template void launchBackward<DwStrategy::Separate, cuda_defects::kNone>(const RmsNormBackwardArgs&, const LaunchEnv&,
                                                                        const cuda_defects::LaunchDefects&);

namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_separate",
    "128-bit loads, fp32 accumulation, block all-reduce; dW via per-CTA fp32 partials and a separate fixed-order "
    "reduction kernel",
    Contracts{true, true, DType::F32});
}  // namespace

}  // namespace ulpcheck::rmsnorm_cuda
