"""RMSNorm through the Python door.

forward(x, w, eps) -> y, or (y, rstd) with saves_stats=True;
backward(x, w, dy, rstd, eps) -> (dx, dw).
"""

from . import Op, norm


def forward(variant, call):
    out = variant.forward(call.act("x"), call.vec("w"), call.eps)
    y, rstd = out if variant.saves_stats else (out, None)
    call.store("y", y, call.act("y"))
    if variant.saves_stats:
        call.store_stat("rstd", rstd)


def backward(variant, call):
    import torch
    rstd = call.saved_stat("rstd") if variant.saves_stats else None
    with torch.enable_grad():
        grads = variant.backward(call.act("x"), call.vec("w"), call.act("dy"), rstd, call.eps)
    if len(grads) != 2:
        raise ValueError(f"returned {len(grads)} gradients, expected dx, dw")
    call.store("dx", grads[0], call.act("dx"))
    call.store_vec("dw", grads[1])


OP = Op(name="rmsnorm",
        spec_options=(norm.FP32_WEIGHTS, norm.ROUNDING, norm.WEIGHT_OFFSET, norm.STATS),
        rules=(norm.stats_need_saving, norm.stats_in_x_dtype_not_with_llama),
        entries={"rmsnorm_forward": forward, "rmsnorm_backward": backward})
