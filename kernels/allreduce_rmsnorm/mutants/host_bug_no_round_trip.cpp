// Mutant: the fused kernel adds the residual to the fp32 sum of the ranks'
// partials without first rounding that sum to the activation dtype, as the
// unfused pipeline (which stores the allreduce result in T) must. aiter PR
// #2586; their test fed every rank the same input, whose sum is exact, so
// the missing rounding never showed. Must be caught by fused_vs_unfused.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = allreduce_rmsnorm_host::registerMutant(
    "host_bug_no_round_trip", "fused one-shot host port adding the residual to the unrounded fp32 sum",
    "fused allreduce + residual add without the round trip of the sum to the activation dtype (aiter PR #2586)",
    "fused_vs_unfused", {.no_round_trip = true});
}  // namespace
}  // namespace ulpcheck
