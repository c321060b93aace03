"""Fused add + RMSNorm variants for the Python door's suite, each declaring
one spec and computing the other: the two orders production libraries ship
(the norm of the rounded sum, the unfused pipeline's and Liger's; of the
fp32 sum, FlashInfer's and quack's), confused."""

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


ulpcheck.fused_add_rmsnorm("py_fused_add_fp32_sum_declared_rounded", forward=norm_of_fp32_sum, backend="host",
                           dtypes=("bf16", "fp16"))
ulpcheck.fused_add_rmsnorm("py_fused_add_rounded_sum_declared_fp32", forward=norm_of_rounded_sum, backend="host",
                           dtypes=("bf16", "fp16"), sum="fp32")
