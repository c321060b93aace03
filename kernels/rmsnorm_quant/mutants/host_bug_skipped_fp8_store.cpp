// Mutant: the last element of y_q never stored (a tail the vectorized store
// loop leaves out). Under overflow=nonfinite every fp8 code, the NaN poison
// included, is a legal output: memory safety must still see it.
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_bug_skipped_fp8_store", "the last element of the quantized output never stored",
    "a vectorized fp8 store loop that leaves the row's tail out", "memory_safety", {.last_element_not_stored = true});
}  // namespace
}  // namespace ulpcheck
