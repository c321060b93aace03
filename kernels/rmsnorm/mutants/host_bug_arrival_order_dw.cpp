// Mutant: dW partials summed in the order CTAs happen to arrive, as an atomic
// accumulation does (quack PR #101's first version, rejected for it), while
// claiming to be deterministic. host_atomic runs the same code under an honest
// contract. Must be caught by determinism.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_arrival_order_dw", "host port whose dW reduction order changes between calls",
    "arrival-order (atomic) dW accumulation is nondeterministic (quack PR #101, first version)", "determinism", {},
    rmsnorm_host::DwStrategy::Atomic);
}  // namespace
}  // namespace ulpcheck
