// Mutant: the backward never processes the last partial vector of a row (the
// N % vec scalar tail): those dx are never written and the row sums miss their
// terms. Must be caught by memory_safety (unwritten outputs) and accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_drop_tail", "host port whose backward skips the scalar tail of each row",
    "last partial vector dropped when N is not a multiple of the vector width (Liger #518 class)", "memory_safety",
    {.drop_tail = true});
}  // namespace
}  // namespace ulpcheck
