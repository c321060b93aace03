// Mutant: the forward saves rstd rounded to bf16, and the backward computes
// dx and dW from that 8-bit rstd (Helion PR #2273). Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant("host_bug_rstd_bf16", "host port saving rstd in bf16",
                                                     "rstd saved in bf16 (Helion PR #2273)", "accuracy",
                                                     {.rstd_in_bf16 = true});
}  // namespace
}  // namespace ulpcheck
