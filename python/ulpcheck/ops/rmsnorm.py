"""RMSNorm through the Python door.

forward(x, w, eps) -> y, or (y, rstd) with saves_stats=True;
backward(x, w, dy, rstd, eps) -> (dx, dw), or backward=None (an inference
kernel: its forward alone is judged). With bias_variants=True, cases
with a bias (y = xhat w + b, quack's rmsnorm(bias=)) call forward(x, w, eps,
bias=b) and backward(..., eps, has_bias=True) -> (dx, dw, db).
"""

from . import Op, SpecOption, norm


def forward(variant, call):
    # A bias (bias=yes) is passed only to a variant that declares bias_variants.
    bias = {"bias": call.vec("b")} if call.has("b") else {}
    out = variant.forward(call.act("x"), call.vec("w"), call.eps, **bias)
    y, rstd = out if variant.saves_stats else (out, None)
    call.store("y", y, call.act("y"))
    if variant.saves_stats:
        call.store_stat("rstd", rstd)


def backward(variant, call):
    import torch
    rstd = call.saved_stat("rstd") if variant.saves_stats else None
    bias = {"has_bias": True} if call.has("db") else {}
    with torch.enable_grad():
        grads = variant.backward(call.act("x"), call.vec("w"), call.act("dy"), rstd, call.eps, **bias)
    if len(grads) != 2 + len(bias):
        raise ValueError(f"returned {len(grads)} gradients, expected {'dx, dw, db' if bias else 'dx, dw'}")
    call.store("dx", grads[0], call.act("dx"))
    call.store_vec("dw", grads[1])
    if bias:
        call.store_vec("db", grads[2])


# Also with a bias b (w's dtype): y = x rstd (offset + w) + b, db = sum dy
# (quack's rmsnorm(bias=)); forward gets bias=b, backward has_bias=True.
BIAS_VARIANTS = SpecOption("bias_variants", False, norm.flag("bias_variants"))


def stats_in_x_dtype_not_with_llama(v):
    if v.spec["stats"] != "fp32" and v.spec["rounding"] == "llama":
        return "stats='activation' with rounding='llama' is not modelled"
    return None


def bias_not_with_llama(v):
    return "a bias with rounding='llama' is not modelled" if v.spec["bias_variants"] and v.spec["rounding"] == "llama" \
        else None


OP = Op(name="rmsnorm",
        spec_options=(norm.FP32_WEIGHTS, norm.ROUNDING, norm.WEIGHT_OFFSET, norm.STATS, BIAS_VARIANTS),
        rules=(norm.no_layernorm_statistics, norm.stats_need_saving, stats_in_x_dtype_not_with_llama,
               bias_not_with_llama),
        entries={"rmsnorm_forward": forward, "rmsnorm_backward": backward})
