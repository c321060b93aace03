// Mutant: one element of the last row one E4M3/E5M2 code away from zero,
// where its value lies within a quarter ulp of an fp8 value (no rounding
// boundary near: no budget admits it). vLLM PR #54111 found a kernel one
// E4M3 ulp off in 2,103,296 values. Accuracy.
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_bug_one_fp8_ulp_off", "one quantized element one fp8 code off, far from any rounding boundary",
    "vLLM PR #54111: a per-group quant kernel one E4M3 ulp off in one of 2,103,296 values", "accuracy",
    {.one_element_one_ulp_off = true});
}  // namespace
}  // namespace ulpcheck
