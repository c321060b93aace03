// Mutant: cuda_lastblock without its __threadfence calls (quack PR #109's
// last-CTA-reduces pattern, minus the fence). A CTA's partial-row stores and
// its atomic ticket are then unordered for other SMs, so the CTA that draws
// the last ticket may read a partial row before it lands: it sums the poison
// the harness left in the workspace, or a stale value. On an idle H100 that
// never showed in 1,300 cases; beside determinism's schedule-perturbing load,
// whose stores queue up the L2, it shows within a second.
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::LastBlock, cuda_defects::kNoFenceBeforeTicket>(
    "cuda_bug_missing_threadfence", "cuda_lastblock with no __threadfence before the ticket or after it",
    Contracts{true, true, DType::F32},
    {"missing __threadfence before the last-block ticket: memory ordering (quack PR #109 pattern)", "determinism"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
