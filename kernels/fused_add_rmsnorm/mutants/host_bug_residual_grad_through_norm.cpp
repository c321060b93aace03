// Mutant: fused add + RMSNorm's backward passes the gradient reaching
// residual_out through the norm's backward with dy, dx = dnorm(dy +
// dresidual_out), instead of adding it after, dx = dresidual_out + dnorm(dy)
// (quack PR #53). Every dx and dw off by far more than rounding: accuracy.
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = fused_add_host::registerPort(
    "host_bug_residual_grad_through_norm",
    "fused add backward taking the norm's backward of dy + dresidual_out instead of adding dresidual_out after it",
    "quack PR #53: the prenorm backward computed (dres_out + dout) * dnorm, not dres_out + dout * dnorm", "accuracy",
    {.residual_grad_through_norm = true});
}  // namespace
}  // namespace ulpcheck
