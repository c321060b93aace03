// Mutant: each rank sums the partials starting from its own (x_r, x_r+1,
// ...), the natural order of a ring, so fp32 rounding differs between ranks
// and tensor-parallel replicas drift apart. Must be caught by rank_consistency.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = allreduce_rmsnorm_host::registerMutant(
    "host_bug_rank_order", "fused one-shot host port in which every rank sums from its own partial",
    "ranks reducing in different orders hold different bits (the rank-consistency check of vLLM's and FlashInfer's "
    "custom allreduce tests)",
    "rank_consistency", {.sum_from_own_rank = true});
}  // namespace
}  // namespace ulpcheck
