// cuda_twopass: the LayerNorm CUDA kernels of layernorm_cuda.cuh with no
// defect switched on. Two-pass statistics, 128-bit loads, fp32
// accumulation; dgamma and dbeta through per-CTA fp32 partials and a
// fixed-order second kernel (deterministic, batch invariant).
#include "kernels/layernorm/layernorm_cuda.cuh"

namespace ulpcheck::layernorm_cuda {

template void forward<cuda_defects::kNone>(const LayerNormForwardArgs&, const LaunchEnv&);
template void backward<cuda_defects::kNone>(const LayerNormBackwardArgs&, const LaunchEnv&,
                                            const cuda_defects::LaunchDefects&);

namespace {
const bool registered = registerVariant(
    "cuda_twopass",
    "two-pass mean/variance in registers, 128-bit loads, fp32 accumulation, block all-reduce; dgamma and dbeta via "
    "per-CTA fp32 partials and a fixed-order reduction kernel");
}  // namespace
}  // namespace ulpcheck::layernorm_cuda
