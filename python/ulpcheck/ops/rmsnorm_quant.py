"""RMSNorm with its output quantized to FP8, through the Python door.

forward(x, w, scale, eps) -> y_q under quant="static" (scale: a 1-element
fp32 tensor, the given scale), or forward(x, w, None, eps) -> (y_q, scale)
under quant="token" (scale: M fp32 values, one per row, or M x 1) and
quant="group128" / "group64" (scale: M x ceil(N / 128) (64), each of a group
of columns of a row, the last group shorter where it does not divide N). y_q is
M x N in the spec's fp8 dtype (torch.float8_e4m3fn, or torch.float8_e5m2
with fp8="e5m2"). A variant declares the one value of each field it
implements (kernels/rmsnorm_quant/rmsnorm_quant.h has the spec):
quant="static"|"token"|"group128"|"group64", fp8="e4m3"|"e5m2", overflow="satfinite"|"nonfinite"
(past the largest finite value: it, or NaN/Inf as torch's casts give),
scaled="fp32"|"activation" (the fp32 y, or y rounded to x's dtype first),
inverse="exact"|"approx"|"divide" (times fl(1/s), times an approximate
1/s, or y / s).
"""

from . import Op, SpecOption, norm


def forward(variant, call):
    y = call.quantized("y")
    if call.has("static_scale"):
        call.store("y", variant.forward(call.act("x"), call.vec("w"), call.scalar("static_scale"), call.eps), y)
        return
    out = variant.forward(call.act("x"), call.vec("w"), None, call.eps)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError("quant='token' or 'group...': return (y_q, scale)")
    call.store("y", out[0], y)
    call.store("scale", out[1], call.scales("scale", GROUP_COLUMNS.get(call.spec.get("quant", "token"), call.N)))


QUANT = SpecOption("quant", "static", norm.one_of("quant", ("static", "token", "group128", "group64")))
GROUP_COLUMNS = {"group128": 128, "group64": 64}  # the columns one scale covers; token: N
FP8 = SpecOption("fp8", "e4m3", norm.one_of("fp8", ("e4m3", "e5m2")))
OVERFLOW = SpecOption("overflow", "satfinite", norm.one_of("overflow", ("satfinite", "nonfinite")))
SCALED = SpecOption("scaled", "fp32", norm.one_of("scaled", ("fp32", "activation")))
INVERSE = SpecOption("inverse", "exact", norm.one_of("inverse", ("exact", "approx", "divide")))


def forward_only(v):
    return "rmsnorm_quant is forward only: backward=None" if v.backward is not None else None


OP = Op(name="rmsnorm_quant",
        spec_options=(norm.FP32_WEIGHTS, norm.WEIGHT_OFFSET, QUANT, FP8, OVERFLOW, SCALED, INVERSE),
        rules=(forward_only,),
        entries={"rmsnorm_quant_forward": forward})
