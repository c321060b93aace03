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
  may lower to an approximate divide. It is declared the quotient of a plain
  fp32 sum (mean_of_plain_sum: X_f32 = X_row.to(tl.float32), masked lanes
  loaded as 0, tl.sum, then `/ n_cols`; within 2 ulp), so a row whose sum is
  exact (constant rows; 16-bit rows of large mean) has a mean within 4 u of it.
  It stores the mean and rstd it computed and forms Y_f32 = X_centered rstd
  W + B and the variance from those same values, and its backward rebuilds
  x_hat = (x - mean) rstd from the saved ones: uses_saved_statistics. Its
  reductions' shape is declared below (row_depth, col_depth).
- liger_fused_add_rms_norm (and _gemma, offset 1.0): LigerFusedAddRMSNormFunction
  (ops/fused_add_rms_norm.py), casting_mode "gemma": S = X + R stored in X's
  dtype (rounded, :77-84), the variance of that S in fp32, Y = RN((S rstd)
  (offset + f(W))) (:117-118): the spec's sum="rounded". Its backward
  (:124-221) reads the saved S and RSTD: m = f(dY) (W + offset) in fp32,
  dX = rstd m + c S + dS_out in fp32, stored once in X's dtype, returned as
  both dX and dR (:360); dW from fp32 partials per SM summed by torch. S is
  allocated in X's dtype whatever R's, so an fp32 residual is not declared;
  an fp32 weight is (W is cast to fp32 in gemma mode).
- liger_fused_add_rms_norm_llama: casting_mode "llama" (its default),
  declared rounding="llama": S_row = RN_T(S rstd) (:112-113), then
  Y = S_row (offset + W) in fp32 (offset an fp32 runtime scalar, :115),
  rounded once; its backward as the RMSNorm llama mode's (m = (dY (W +
  offset)) in fp32, dW += dY RN_T(S rstd) in T, :193-200), plus dS_out.
  On the H100 (2026-11-27) its 200 cases of seed 0x3011 passed on that spec.
  The three fused adds are declared not batch invariant: with rows strided
  by a multiple of 16 elements (ld = 928, N = 923), a row's y alone (M = 1)
  and in a batch (M = 43) differed in 6 of 276,900 fp16 elements on the
  H200 without ulpcheck (gemma mode); contiguous rows (ld = N) never did
  (docs/external-kernels.md).
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
fused_add_ops = importlib.import_module("liger_kernel.ops.fused_add_rms_norm")


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


def _fused_add(offset, mode="gemma"):
    def forward(x, residual, w, eps):
        y, s, *_ = fused_add_ops.fused_add_rms_norm_forward(x, residual, w, eps, offset, mode)
        return y, s

    def backward(x, residual, w, dy, dresidual_out, eps):
        # Through its autograd Function, as training calls it (in_place=False: dY is ulpcheck's).
        x, residual, w = (t.detach().clone().requires_grad_() for t in (x, residual, w))
        y, s = fused_add_ops.LigerFusedAddRMSNormFunction.apply(x, residual, w, eps, offset, mode, False)
        torch.autograd.backward([y, s], [dy, dresidual_out])
        return x.grad, residual.grad, w.grad

    return forward, backward


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
# The shape of Liger's LayerNorm reductions, in roundings along a path (an
# add of an exact zero, a masked lane, does not round). Row sums (the forward's
# mean and variance, the backward's c1 and c2) are each one tl.sum over
# BLOCK = next_power_of_2(N) elements with calculate_settings' warps (4 below
# BLOCK 2048, 8 below 8192, 16 below 32768, then 32). Triton lowers tl.sum to
# a chain over each thread's max(1, BLOCK / (32 warps)) elements, 5 shuffle
# levels in a warp and log2(warps) across warps (ReduceOpToLLVM), so at most
# 16 + 5 + 3 roundings up to N = 8192 and 64 + 5 + 5 at N = 65536, Liger's
# largest: ceil(N / 256) + 15 covers every N (checked for each N <= 65536).
# dgamma and dbeta: a chain over each program's ceil(M / SMs) rows
# (_layer_norm_backward_kernel's rows_per_program, the first add onto 0.0
# exact), then torch's sum over the SMs' partials, at most SMs - 1 roundings
# in any order: ceil(M / SMs) + SMs.
_LIGER_LAYER_NORM_ROW_DEPTH = (256, 15)


def _liger_layer_norm_col_depth():
    if not torch.cuda.is_available():
        return 0  # undeclared: the kernel cannot run here anyway
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return (sms, sms)


ulpcheck.layernorm("liger_layer_norm", forward=layer_norm_forward, backward=layer_norm_backward, backend="cuda",
                   saves_stats=True, two_pass_statistics=True, mean_of_plain_sum=True, libraries=_libs,
                   row_depth=_LIGER_LAYER_NORM_ROW_DEPTH, col_depth=_liger_layer_norm_col_depth(),
                   uses_saved_statistics=True,
                   description="Liger's Triton LayerNorm: fp32 statistics, saved and consumed by its backward")
for name, offset, mode in (("liger_fused_add_rms_norm", 0.0, "gemma"), ("liger_fused_add_rms_norm_gemma", 1.0, "gemma"),
                           ("liger_fused_add_rms_norm_llama", 0.0, "llama")):
    forward, backward = _fused_add(offset, mode)
    ulpcheck.fused_add_rmsnorm(name, forward=forward, backward=backward, backend="cuda", fp32_weights=True,
                               rounding="llama" if mode == "llama" else "plain", weight_offset=offset,
                               max_cols=65536, batch_invariant=False, libraries=_libs,
                               description="Liger's Triton fused add + RMSNorm (LigerFusedAddRMSNormFunction), "
                                           f"casting_mode='{mode}', offset {offset}: the norm of the rounded sum")
