// Mutant: the forward squares x in fp16 before accumulating, so |x| > 256
// overflows to Inf (rstd 0, y 0) and smaller values lose all but 11 bits
// (PyTorch #133085). Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_x_squared_fp16", "host port whose forward rounds each x^2 to fp16",
    "x^2 computed in fp16: overflow past |x| = 256 (PyTorch #133085)", "accuracy", {.x_squared_in_fp16 = true});
}  // namespace
}  // namespace ulpcheck
