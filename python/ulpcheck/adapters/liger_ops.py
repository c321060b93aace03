"""Liger-Kernel's RMSNorm and LayerNorm (Triton), through the forward and
backward functions of liger_kernel.ops.rms_norm and liger_kernel.ops.layer_norm.

    ulpcheck run --python python/ulpcheck/adapters/liger_ops.py --kernel liger_rms_norm

The specs they implement (liger-kernel 0.8.5, read from its source):
- liger_rms_norm: casting_mode "gemma", offset 0. x and w are cast to fp32,
  y = (x rstd) w in fp32 and rounded once to x's dtype; rstd is saved in fp32
  and the backward consumes it: ulpcheck's plain spec in every dtype. The
  weight is read in its own dtype and dW (fp32 partials summed by torch)
  returned in it, so an fp32 weight beside 16-bit x is declared too.
- liger_rms_norm_gemma: the same with offset 1.0 (Gemma's 1 + w, formed in
  fp32 after w is cast): the spec's weight_offset=1.0, declared as the only
  offset it implements.
- liger_rms_norm_llama: casting_mode "llama" (Liger's default), declared
  rounding="llama": x rstd rounded to x's dtype before the weight multiply
  (Y = X_row.to(X dtype) * W); in the backward m = (dY * (W + offset)).to(fp32)
  in fp32 (offset is a runtime fp32 argument) and dW_row += dY * (X rstd).to(X
  dtype), a product of two x-dtype tensors that Triton forms in that dtype.
  That is ulpcheck's llama spec (oracles/rmsnorm.cpp), with an fp32 weight too.
- liger_layer_norm: fp32 statistics (0.8.5 saves mean and rstd in fp32; up
  to at least 0.8.2 they were saved in X's dtype, ulpcheck's stats=T spec,
  with x-hat rebuilt from them in the backward),
  y = (x - mean) rstd g + b in fp32, one rounding: the plain spec. Its
  statistics are two-pass (_layer_norm_forward_kernel: mean = tl.sum(x) / N,
  then tl.sum((x - mean)^2) / N), declared so: no running-means allowance.
  The mean is not declared a correctly rounded quotient: Triton's fp32 `/`
  may lower to an approximate divide.
Both backward passes keep one fp32 dW/dgamma/dbeta partial per SM (a fixed
grid of sm_count programs over fixed row ranges) and sum them with torch:
deterministic. Liger's RMSNorm is not batch invariant: at N <= 256 and
M >= 32768 it switches to a blocked kernel (16 rows a program) whose row sums
round differently. ulpcheck found it on the H100 (docs/external-kernels.md):
  op=rmsnorm kernel=liger_rms_norm dtype=fp32 M=32768 N=3 ld=3 eps=0x1.0c6f7ap-20
  dist=normal sigma=0x1p+0 mean=0x0p+0 dy_sigma=0x1p+0 seed=0x0
(dx[16384, 2] is 0x3e256352 in the batch and 0x3e256354 alone). LayerNorm
has one kernel per row whatever M: declared batch invariant. Liger's own
autograd Functions make x contiguous first; these functions take row
strides, so strided rows are tested too.
"""

import importlib

import torch

import ulpcheck

rms_ops = importlib.import_module("liger_kernel.ops.rms_norm")
ln_ops = importlib.import_module("liger_kernel.ops.layer_norm")
calculate_settings = importlib.import_module("liger_kernel.ops.utils").calculate_settings


def _rms_norm(mode, offset=0.0):
    code = rms_ops._str_to_casting_mode[mode]

    def forward(x, w, eps):
        y, _, rstd, _, _, _ = rms_ops.rms_norm_forward(x, w, eps, offset, code, None)
        return y, rstd

    def backward(x, w, dy, rstd, eps):
        block, warps = calculate_settings(x.shape[1])
        return rms_ops.rms_norm_backward(dy, x, w, rstd, offset, code, block, warps, False, None)

    return forward, backward


def layer_norm_forward(x, gamma, beta, eps):
    y, _, mean, rstd, _, _ = ln_ops.layer_norm_forward(x, gamma, beta, eps)
    return y, mean, rstd


def layer_norm_backward(x, gamma, dy, mean, rstd, eps):
    bias = torch.empty_like(gamma)  # only its dtype is read: dbeta is returned in it
    return ln_ops.layer_norm_backward(dy, x, gamma, bias, mean, rstd)


_libs = ("torch", "triton", "liger_kernel")
_version = "liger_kernel.ops.rms_norm (casting_mode={})"

forward, backward = _rms_norm("gemma")
ulpcheck.rmsnorm("liger_rms_norm", forward=forward, backward=backward, backend="cuda", saves_stats=True,
                 batch_invariant=False, fp32_weights=True, libraries=_libs,
                 description="Liger's Triton RMSNorm, casting_mode='gemma', offset 0 (fp32 math, one rounding), "
                             "rstd saved in fp32")
forward, backward = _rms_norm("gemma", offset=1.0)
ulpcheck.rmsnorm("liger_rms_norm_gemma", forward=forward, backward=backward, backend="cuda", saves_stats=True,
                 batch_invariant=False, fp32_weights=True, weight_offset=1.0, libraries=_libs,
                 description="Liger's Triton RMSNorm, casting_mode='gemma', offset 1.0 (Gemma's 1 + w in fp32)")
forward, backward = _rms_norm("llama")
ulpcheck.rmsnorm("liger_rms_norm_llama", forward=forward, backward=backward, backend="cuda", saves_stats=True,
                 batch_invariant=False, rounding="llama", fp32_weights=True, libraries=_libs,
                 description="Liger's Triton RMSNorm, casting_mode='llama' (its default): x-hat rounded to x's "
                             "dtype before the weight, dW terms dY x-hat formed in x's dtype")
ulpcheck.layernorm("liger_layer_norm", forward=layer_norm_forward, backward=layer_norm_backward, backend="cuda",
                   saves_stats=True, two_pass_statistics=True, libraries=_libs,
                   description="Liger's Triton LayerNorm: fp32 statistics, saved and consumed by its backward")
