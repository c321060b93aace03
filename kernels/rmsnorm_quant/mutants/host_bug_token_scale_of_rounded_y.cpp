// Mutant: quant=token's scale taken from the row's largest |y| rounded to the
// activation dtype where the spec scales the fp32 y (scaled=fp32): the scale
// off by up to half a bf16 ulp of amax, and every element of the row scaled
// by it. Accuracy, on the scale (and on y where it crosses a boundary).
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_bug_token_scale_of_rounded_y",
    "the per-token scale from the largest |y| rounded to the activation dtype where the spec scales the fp32 y",
    "a dynamic per-token scale computed from y stored in bf16 while the quantized values read the fp32 y (the "
    "rounding points FlashInfer's rmsnorm_quant and its allreduce fusion differ on)",
    "accuracy", {.token_scale_of_t_rounded_y = true});
}  // namespace
}  // namespace ulpcheck
