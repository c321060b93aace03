// Mutant: the variance pass counts the masked lanes of the row's last vector
// as zeros, adding (vec - N % vec) (0 - mean)^2 to the sum of squares. At
// mean ~ 0 it hides below fp32 noise; a large-mean row makes rstd wrong by
// orders of magnitude. Must be caught by accuracy.
#include "kernels/layernorm/layernorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = layernorm_host::registerMutant(
    "host_bug_masked_lane_variance", "host port whose variance counts the masked tail lanes as zeros",
    "mean/variance include masked lanes when N is not a multiple of the block width (Liger #518; quack 9310d47 at "
    "x ~ 1000)",
    "accuracy", {.variance_counts_masked_lanes = true});
}  // namespace
}  // namespace ulpcheck
