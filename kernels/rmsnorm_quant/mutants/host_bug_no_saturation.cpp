// Mutant: a saturating spec (CUDA's cvt .satfinite, FlashInfer's and vLLM's
// quantizing norms) converted without saturation: NaN in E4M3 (+-Inf in
// E5M2) where the largest finite value is due, which the next GEMM spreads
// through its whole output tile. Accuracy, on a case whose scale overflows.
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_bug_no_saturation", "overflow=satfinite ignored: NaN or Inf where the largest finite fp8 value is due",
    "an fp8 conversion without __NV_SATFINITE where the spec saturates (static scales below amax / 448 overflow)",
    "accuracy", {.no_saturation = true});
}  // namespace
}  // namespace ulpcheck
