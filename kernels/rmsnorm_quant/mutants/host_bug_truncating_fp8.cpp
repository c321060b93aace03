// Mutant: y converted to fp8 by truncation toward zero, not to nearest even
// (CK's default fp32 -> bf16 conversion truncated: aiter #5151). About half
// the elements one code toward zero: accuracy, and the rounding bias names it.
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_bug_truncating_fp8", "the fp8 conversion truncating toward zero instead of rounding to nearest even",
    "aiter #5151: CK's fp32 -> bf16 conversion defaulted to truncation, biasing every output", "accuracy",
    {.truncating_conversion = true});
}  // namespace
}  // namespace ulpcheck
