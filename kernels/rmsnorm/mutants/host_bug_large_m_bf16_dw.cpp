// Mutant: the dispatch path taken only for M >= 32768 sums the per-CTA dW
// partials in bf16; no test reached that M, so it shipped (Liger-Kernel PR #950).
// Must be caught by accuracy, which needs the generators to reach M >= 32768.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_large_m_bf16_dw", "host port summing the dW partials in bf16 on the M >= 32768 path",
    "dW block reduction summed in bf16 on the large-M dispatch path only (Liger-Kernel PR #950)", "accuracy",
    {.dw_in_bf16_at_large_m = true});
}  // namespace
}  // namespace ulpcheck
