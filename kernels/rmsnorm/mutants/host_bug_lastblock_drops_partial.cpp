// Mutant: the host mirror of cuda_bug_lastblock_drops_partial: on grids of
// more than 1024 CTAs the last-CTA dW sum leaves the last partial out. One
// partial among thousands fits in the depth bound at that depth; the bound
// from the declared order's partial sums sees it. Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_lastblock_drops_partial", "host_lastblock leaving the last CTA's dW partial out on grids over 1024 CTAs",
    "one dW partial among thousands left out of the last-CTA sum on large grids (off-by-one)", "accuracy",
    {.lastblock_drops_partial_on_large_grid = true}, rmsnorm_host::DwStrategy::LastBlock);
}  // namespace
}  // namespace ulpcheck
