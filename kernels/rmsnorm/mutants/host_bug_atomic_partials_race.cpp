// Mutant: the host mirror of cuda_bug_atomic_partials_race, ulpcheck's own
// cuda_atomic as it first shipped (found by its default campaign on the
// H100: M=7 N=8644 fp32, dW 1e5x over budget in 1 run of 3). On the workspace
// path the atomic dW epilogue added partial columns other warps had
// accumulated, with no barrier, so one could miss the CTA's last row. The
// port loses that row on every third call, as a race fails on some runs only;
// the contract (arrival order) allows other bits, not other sums:
// determinism, which judges every repeat of a nondeterministic variant,
// must catch it.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_atomic_partials_race", "host_atomic whose workspace-path partials miss the last row on every third call",
    "dW partials read across warps without a barrier (ulpcheck's own cuda_atomic, found by its default campaign)",
    "determinism", {.atomic_partials_race = true}, rmsnorm_host::DwStrategy::Atomic, 1, /*deterministic=*/false);
}  // namespace
}  // namespace ulpcheck
