"""Fused residual add + RMSNorm through the Python door.

forward(x, residual, w, eps) -> (y, residual_out), where residual_out = x +
residual in the residual's dtype (x's, or fp32 in cases of a variant that
declares fp32_residual=True: quack's residual_dtype=torch.float32) and y the
RMSNorm of residual_out (sum="rounded", the default: the unfused pipeline's,
Liger's) or of the fp32 sum before its rounding (sum="fp32": FlashInfer's,
quack's); with rounding="llama" (vLLM's fused_add_rms_norm, Liger's llama
mode), x-hat of residual_out rounded to x's dtype before the weight. x and
residual are ulpcheck's buffers: a library that writes its
results into its inputs (FlashInfer's fused_add_rmsnorm) is called on clones.

backward(x, residual, w, dy, dresidual_out, eps) -> (dx, dresidual, dw), for
a variant that has one (backward=None: forward only): the forward's inputs,
y's gradient dy and the gradient reaching residual_out along the residual
stream, dresidual_out (the residual's dtype). g = dresidual_out + dnorm(dy),
summed once in fp32, is dx in x's dtype and dresidual in the residual's (the
same tensor where those agree); dw in the weight's. The variant runs its own
forward for what its backward saves (an autograd Function: forward, then
torch.autograd.backward([y, residual_out], [dy, dresidual_out])).
"""

from . import Op, SpecOption, norm


def forward(variant, call):
    y, residual_out = variant.forward(call.act("x"), call.residual("residual"), call.vec("w"), call.eps)
    call.store("y", y, call.act("y"))
    call.store("residual_out", residual_out, call.residual("residual_out"))


def backward(variant, call):
    import torch
    with torch.enable_grad():
        grads = variant.backward(call.act("x"), call.residual("residual"), call.vec("w"), call.act("dy"),
                                 call.residual("dresidual_out"), call.eps)
    if len(grads) != 3:
        raise ValueError(f"returned {len(grads)} gradients, expected dx, dresidual, dw")
    call.store("dx", grads[0], call.act("dx"))
    call.store("dresidual", grads[1], call.residual("dresidual"))
    call.store_vec("dw", grads[2])


# Also an fp32 residual (and residual_out) beside 16-bit x (the spec's res=fp32).
FP32_RESIDUAL = SpecOption("fp32_residual", False, norm.flag("fp32_residual"))
# The one sum its norm reads: "rounded" (residual_out) or "fp32" (the sum before its rounding).
SUM = SpecOption("sum", "rounded", norm.one_of("sum", ("rounded", "fp32")))

def llama_of_the_rounded_sum_only(v):
    # Llama's x-hat rounding (vLLM's fused_add_rms_norm, Liger's llama mode) is
    # modelled on the rounded residual_out in x's dtype.
    if v.spec["rounding"] == "llama" and (v.spec["sum"] != "rounded" or v.spec["fp32_residual"]):
        return "rounding='llama' is modelled for the norm of the rounded sum in x's dtype only"
    return None


OP = Op(name="fused_add_rmsnorm",
        spec_options=(norm.FP32_WEIGHTS, norm.ROUNDING, norm.WEIGHT_OFFSET, FP32_RESIDUAL, SUM),
        rules=(norm.no_layernorm_statistics, llama_of_the_rounded_sum_only),
        entries={"fused_add_rmsnorm_forward": forward, "fused_add_rmsnorm_backward": backward})
