// The correct CUDA RMSNorm + FP8 quantization (rmsnorm_quant_cuda.cuh).
#include "kernels/rmsnorm_quant/rmsnorm_quant_cuda.cuh"

namespace ulpcheck::rmsnorm_quant_cuda {
namespace {
const bool registered = registerVariant(
    "cuda_rmsnorm_quant",
    "RMSNorm's CUDA row (128-bit loads, fp32 accumulation, block all-reduce), y recomputed in registers, per-group "
    "maxima through shared-memory atomics, CUDA's fp8 conversion");
}  // namespace
}  // namespace ulpcheck::rmsnorm_quant_cuda
