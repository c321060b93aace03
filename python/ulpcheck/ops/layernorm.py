"""LayerNorm through the Python door.

forward(x, gamma, beta, eps) -> y, or (y, mean, rstd) with saves_stats=True;
backward(x, gamma, dy, mean, rstd, eps) -> (dx, dgamma, dbeta). With
affine_variants=True, cases without beta and without either parameter give
None for them (torch.nn.LayerNorm(bias=False / elementwise_affine=False)).
"""

from . import Op, SpecOption, norm


def forward(variant, call):
    out = variant.forward(call.act("x"), call.vec("gamma"), call.vec("beta"), call.eps)
    y, mean, rstd = out if variant.saves_stats else (out, None, None)
    call.store("y", y, call.act("y"))
    if variant.saves_stats:
        call.store_stat("mean", mean)
        call.store_stat("rstd", rstd)


def backward(variant, call):
    import torch
    mean, rstd = (call.saved_stat("mean"), call.saved_stat("rstd")) if variant.saves_stats else (None, None)
    with torch.enable_grad():
        dx, dgamma, dbeta = variant.backward(call.act("x"), call.vec("gamma"), call.act("dy"), mean, rstd, call.eps)
    call.store("dx", dx, call.act("dx"))
    call.store_vec("dgamma", dgamma)
    call.store_vec("dbeta", dbeta)


# Also without beta (beta None, dbeta not stored) and without either (gamma
# None too): torch.nn.LayerNorm(bias=False / elementwise_affine=False).
AFFINE_VARIANTS = SpecOption("affine_variants", False, norm.flag("affine_variants"))

OP = Op(name="layernorm", spec_options=(norm.FP32_WEIGHTS, AFFINE_VARIANTS, norm.STATS),
        rules=(norm.stats_need_saving, norm.saved_statistics_used_as_declared, norm.running_means_shape),
        entries={"layernorm_forward": forward, "layernorm_backward": backward})
