// Mutant: the quantized norm of residual_out, the sum rounded to bf16 or
// fp16, where the spec (sum=fp32: FlashInfer's fused_add_rmsnorm_quant)
// normalises the fp32 sum: the unfused pipeline's rounding point kept in a
// fused kernel that declares the other one, so every y moves by up to half
// an ulp of T before it is scaled, and codes near a boundary flip (aiter
// #2236: a fused add + quant kernel less accurate than vLLM's). Accuracy.
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = fused_add_quant_host::registerPort(
    "host_bug_quant_of_rounded_sum", "normalises and quantizes residual_out where the spec reads the fp32 sum",
    "the norm of the sum rounded to the activation dtype where the spec normalises the fp32 sum (aiter #2236's "
    "fused add + quant, less accurate than the unfused path)",
    "accuracy", {.norm_of_rounded_sum = true});
}  // namespace
}  // namespace ulpcheck
