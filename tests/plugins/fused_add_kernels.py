"""Fused add + RMSNorm variants for the Python door's suite, each declaring
one spec and computing the other: the two orders production libraries ship
(the norm of the rounded sum, the unfused pipeline's and Liger's; of the
fp32 sum, FlashInfer's and quack's), confused, one of them against its
unfused pipeline; Llama's x-hat rounding
declared and skipped; a backward with quack PR #53's bug (the gradient
reaching residual_out passed through the norm's backward with dy, not added
after it); and a forward wrong on its first call in a worker only (cold:
aiter #4888's class)."""

import torch

import ulpcheck


def _rms(v, w, eps):
    vf = v.float()
    return vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def norm_of_fp32_sum(x, residual, w, eps):
    h = x.float() + residual.float()
    return _rms(h, w, eps).to(x.dtype), h.to(residual.dtype)


def norm_of_rounded_sum(x, residual, w, eps):
    residual_out = (x.float() + residual.float()).to(residual.dtype)
    return _rms(residual_out, w, eps).to(x.dtype), residual_out


# The unfused pipeline (the add, then the norm of what it stored), and a fused
# variant declaring it: the norm of the fp32 sum instead, aiter PR #2586's class.
ulpcheck.fused_add_rmsnorm("py_add_then_norm", forward=norm_of_rounded_sum, backend="host", dtypes=("bf16", "fp16"))
ulpcheck.fused_add_rmsnorm("py_fused_add_fp32_sum_declared_rounded", forward=norm_of_fp32_sum, backend="host",
                           dtypes=("bf16", "fp16"), unfused_pipeline="py_add_then_norm",
                           bitwise_with_unfused=("residual_out", "y"))
ulpcheck.fused_add_rmsnorm("py_fused_add_rounded_sum_declared_fp32", forward=norm_of_rounded_sum, backend="host",
                           dtypes=("bf16", "fp16"), sum="fp32")
# Declares Llama's x-hat rounding (vLLM's, Liger's default) and multiplies the unrounded x-hat (vLLM PR #42379's class).
ulpcheck.fused_add_rmsnorm("py_fused_add_llama_declared_xhat_unrounded", forward=norm_of_rounded_sum, backend="host",
                           dtypes=("bf16", "fp16"), rounding="llama")


def _dnorm(v, w, dy, eps):
    vf = v.float()
    rstd = torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + eps)
    xhat, wdy = vf * rstd, dy.float() * w.float()
    return (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True)) * rstd, (dy.float() * xhat).sum(0)


def backward_through_the_norm(x, residual, w, dy, dresidual_out, eps):
    residual_out = (x.float() + residual.float()).to(residual.dtype)
    # quack PR #53: dnorm(dy + dresidual_out), where the spec is dresidual_out + dnorm(dy).
    g, dw = _dnorm(residual_out, w, dy.float() + dresidual_out.float(), eps)
    return g.to(x.dtype), g.to(residual.dtype), dw.to(w.dtype)


ulpcheck.fused_add_rmsnorm("py_fused_add_residual_grad_through_norm", forward=norm_of_rounded_sum,
                           backward=backward_through_the_norm, backend="host", dtypes=("fp32", "bf16"))


_calls_of_the_cold_variant = [0]


def wrong_on_first_call(x, residual, w, eps):
    _calls_of_the_cold_variant[0] += 1
    y, residual_out = norm_of_rounded_sum(x, residual, w, eps)
    if _calls_of_the_cold_variant[0] == 1:  # cold: one element one ulp up
        y.view(-1)[0] = torch.nextafter(y.view(-1)[0], torch.tensor(float("inf"), dtype=y.dtype))
    return y, residual_out


ulpcheck.fused_add_rmsnorm("py_fused_add_wrong_on_first_call", forward=wrong_on_first_call, backend="host",
                           dtypes=("fp32",))


_shapes_seen = set()


def wrong_on_first_call_of_each_shape(x, residual, w, eps):
    # As a JIT-compiled kernel whose freshly compiled module is wrong on its
    # first launch, but for the first shape it meets: so the failure is on a
    # call that is cold for its shape, not the variant's first call.
    shape = (x.dtype, x.shape[1], x.shape[0].bit_length())
    y, residual_out = norm_of_rounded_sum(x, residual, w, eps)
    if shape not in _shapes_seen:
        if _shapes_seen:
            y.view(-1)[0] = torch.nextafter(y.view(-1)[0], torch.tensor(float("inf"), dtype=y.dtype))
        _shapes_seen.add(shape)
    return y, residual_out


ulpcheck.fused_add_rmsnorm("py_fused_add_wrong_on_first_call_of_each_shape",
                           forward=wrong_on_first_call_of_each_shape, backend="host", dtypes=("fp32",),
                           compiles_per_shape=True)
