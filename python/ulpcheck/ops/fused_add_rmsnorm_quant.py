"""Fused residual add + RMSNorm with its output quantized to FP8, through the Python door.

forward(x, residual, w, scale, eps) -> (y_q, residual_out) under
quant="static" (scale: a 1-element fp32 tensor, the given scale), or
forward(x, residual, w, None, eps) -> (y_q, scale, residual_out) under
quant="token" / "group128" / "group64" (scale as rmsnorm_quant's). residual_out
= x + residual in the residual's dtype, as fused_add_rmsnorm's; y_q the
rmsnorm_quant chain on the fp32 RMSNorm of residual_out (sum="rounded") or
of the fp32 sum (sum="fp32": FlashInfer's fused_add_rmsnorm_quant). x and
residual are ulpcheck's buffers: a library that writes into its inputs
(FlashInfer writes residual_out into `residual`) is called on clones. The
options are fused_add_rmsnorm's (fp32_residual, sum) and rmsnorm_quant's
(quant, fp8, overflow, scaled, inverse).
"""

from . import Op, fused_add_rmsnorm, norm, rmsnorm_quant


def forward(variant, call):
    x, residual, w = call.act("x"), call.residual("residual"), call.vec("w")
    y = call.quantized("y")
    if call.has("static_scale"):
        out = variant.forward(x, residual, w, call.scalar("static_scale"), call.eps)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ValueError("quant='static': return (y_q, residual_out)")
        call.store("y", out[0], y)
        call.store("residual_out", out[1], call.residual("residual_out"))
        return
    out = variant.forward(x, residual, w, None, call.eps)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise ValueError("quant='token' or 'group...': return (y_q, scale, residual_out)")
    call.store("y", out[0], y)
    group = rmsnorm_quant.GROUP_COLUMNS.get(call.spec.get("quant", "token"), call.N)
    call.store("scale", out[1], call.scales("scale", group))
    call.store("residual_out", out[2], call.residual("residual_out"))


OP = Op(name="fused_add_rmsnorm_quant",
        spec_options=(norm.FP32_WEIGHTS, norm.WEIGHT_OFFSET, fused_add_rmsnorm.FP32_RESIDUAL, fused_add_rmsnorm.SUM,
                      rmsnorm_quant.QUANT, rmsnorm_quant.FP8, rmsnorm_quant.OVERFLOW, rmsnorm_quant.SCALED,
                      rmsnorm_quant.INVERSE),
        rules=(rmsnorm_quant.forward_only,),
        entries={"fused_add_rmsnorm_quant_forward": forward})
