"""Fused residual add + RMSNorm through the Python door (forward only).

forward(x, residual, w, eps) -> (y, residual_out), where residual_out = x +
residual in the residual's dtype (x's, or fp32 in cases of a variant that
declares fp32_residual=True: quack's residual_dtype=torch.float32) and y the
RMSNorm of residual_out (sum="rounded", the default: the unfused pipeline's,
Liger's) or of the fp32 sum before its rounding (sum="fp32": FlashInfer's,
quack's). x and residual are ulpcheck's buffers: a library that writes its
results into its inputs (FlashInfer's fused_add_rmsnorm) is called on clones.
"""

from . import Op, SpecOption, norm


def forward(variant, call):
    y, residual_out = variant.forward(call.act("x"), call.residual("residual"), call.vec("w"), call.eps)
    call.store("y", y, call.act("y"))
    call.store("residual_out", residual_out, call.residual("residual_out"))


# Also an fp32 residual (and residual_out) beside 16-bit x (the spec's res=fp32).
FP32_RESIDUAL = SpecOption("fp32_residual", False, norm.flag("fp32_residual"))
# The one sum its norm reads: "rounded" (residual_out) or "fp32" (the sum before its rounding).
SUM = SpecOption("sum", "rounded", norm.one_of("sum", ("rounded", "fp32")))

OP = Op(name="fused_add_rmsnorm",
        spec_options=(norm.FP32_WEIGHTS, norm.WEIGHT_OFFSET, FP32_RESIDUAL, SUM),
        entries={"fused_add_rmsnorm_forward": forward})
