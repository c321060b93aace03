// Mutant: dgamma and dbeta land in each other's outputs, but only on the
// large-batch path (M >= 256), so tests at small M never see it
// (torch-xpu-ops PR #4790). Must be caught by accuracy.
#include "kernels/layernorm/layernorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = layernorm_host::registerMutant(
    "host_bug_swap_dgamma_dbeta", "host port whose backward swaps dgamma and dbeta when M >= 256",
    "dgamma and dbeta swapped in one shape regime (torch-xpu-ops PR #4790)", "accuracy",
    {.swap_dgamma_dbeta_at_large_m = true});
}  // namespace
}  // namespace ulpcheck
