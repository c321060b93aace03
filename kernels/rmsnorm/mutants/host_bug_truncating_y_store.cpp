// Mutant (aiter #5151): the forward converts y from fp32 to bf16 or fp16 by
// truncation, as CK's default conversion did, not to nearest. Every output
// leans toward zero by half an ulp on average; the accuracy check's rounding
// bias (properties/property.h, RoundingBias) names it. Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_truncating_y_store", "host port truncating y to T",
    "y converted to bf16/fp16 by truncation, not to nearest (aiter #5151)", "accuracy", {.y_stored_truncated = true});
}  // namespace
}  // namespace ulpcheck
