// Mutant: the backward halves its CTA size for batches of more than 16 rows,
// so a row's reduction order, and its bits, depend on the batch it is in.
// Reproduces vLLM #48271 (block size chosen by M); must be caught by
// batch_invariance. Its chains are twice as long, so it declares twice the
// row depth: accuracy must not be what flags it.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_threads_from_m", "host port whose backward CTA size depends on M",
    "block size chosen by M changes the reduction order (vLLM #48271)", "batch_invariance", {.threads_from_m = true},
    rmsnorm_host::DwStrategy::Separate, 2);
}  // namespace
}  // namespace ulpcheck
