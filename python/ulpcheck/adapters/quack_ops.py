"""quack's RMSNorm (CuTe DSL), through quack.rmsnorm.rmsnorm_fwd / rmsnorm_bwd.

    ulpcheck run --python python/ulpcheck/adapters/quack_ops.py --kernel quack_rmsnorm

The spec (quack-kernels 0.6.5, read from its source): fp32 math, y rounded
once to x's dtype, rstd saved in fp32 (store_rstd=True) and consumed by the
backward; dW from fp32 partials of a persistent grid (one per SM) summed by
torch, rounded to the weight's dtype: ulpcheck's plain spec, with fp32
weights, a bias, and (quack_rmsnorm_gemma) the weight offset 1.

Preconditions: quack compiles each kernel for one hidden size N (and the
backward for a power-of-two bucket of M), assuming 16-byte aligned rows, so
the variant is tested at a set of hidden sizes (production ones and odd
ones that exercise the predicated tail) with aligned rows. Compiles are
cached by quack on disk (QUACK_CACHE_DIR), so a restarted worker does not
compile again, and the variant declares compiles_per_shape: the first call
of each (dtype, N, M bucket) may take remote::kCompileSeconds (900 s), so
compile time does not count against --case-timeout.

quack_rmsnorm_residual: rmsnorm(x, w, residual=, residual_dtype=,
prenorm=True), the library's autograd entry (rmsnorm.py:1666): x + residual
summed in fp32 (f(x) + f(res), :252-258), residual_out its rounding to
residual_dtype (:490-497), rstd of the unrounded fp32 sum, y = (x rstd)
(f(w) + offset) rounded once: the spec's sum="fp32", with an fp32 residual
(residual_dtype=torch.float32) declared too. Its backward (rmsnorm_bwd,
:1350) reads the saved, rounded residual_out with the forward's rstd
(:1635): the spec's backward under sum=fp32; g = dnorm + f(dresidual_out)
in fp32 (:1129-1133), dx in residual_out's dtype (autograd rounds it to
x's), dresidual in dresidual_out's (_rmsnorm_bwd_f_dual).
"""

import importlib

import torch

import ulpcheck

rmsnorm = importlib.import_module("quack.rmsnorm")  # `import quack.rmsnorm` would give the function


def _residual_variant(offset):
    def forward(x, residual, w, eps):
        y, residual_out, _ = rmsnorm.rmsnorm_fwd(x, w, residual=residual, residual_dtype=residual.dtype, eps=eps,
                                                 weight_offset=offset)
        return y, residual_out

    def backward(x, residual, w, dy, dresidual_out, eps):
        x, residual, w = (t.detach().clone().requires_grad_() for t in (x, residual, w))
        y, residual_out = rmsnorm.rmsnorm(x, w, residual=residual, residual_dtype=residual.dtype, eps=eps,
                                          prenorm=True, weight_offset=offset)
        torch.autograd.backward([y, residual_out], [dy, dresidual_out])
        return x.grad, residual.grad, w.grad

    return forward, backward


def _variant(offset):
    def forward(x, w, eps, bias=None):
        y, _, rstd = rmsnorm.rmsnorm_fwd(x, w, bias=bias, eps=eps, store_rstd=True, weight_offset=offset)
        return y, rstd

    def backward(x, w, dy, rstd, eps, has_bias=False):
        dx, dw, db, _ = rmsnorm.rmsnorm_bwd(x, w, dy, rstd, has_bias=has_bias, weight_offset=offset)
        return (dx, dw, db) if has_bias else (dx, dw)

    return forward, backward


# quack takes a weight of any dtype beside x (fp32 in mixed precision: y in
# fp32, rounded once to x's dtype; dW summed in fp32 and rounded to w's
# dtype) and a bias (y = x rstd w + b in fp32; db = sum of dy over rows,
# rounded to w's dtype), both declared. The bias takes the backward's
# general kernel (the dense fast path is bias-free).
for name, offset, what in (("quack_rmsnorm", 0.0, ""),
                           ("quack_rmsnorm_gemma", 1.0, " with weight_offset=1.0 (Gemma's 1 + w)")):
    forward, backward = _variant(offset)
    ulpcheck.rmsnorm(name, forward=forward, backward=backward, backend="cuda", saves_stats=True,
                     aligned_rows=True, cols=(64, 1000, 4096, 5120, 8192), compiles_per_shape=True,
                     fp32_weights=True, bias_variants=True, weight_offset=offset,
                     libraries=("torch", "quack", "cutlass"),
                     description="quack's CuTe DSL RMSNorm: rmsnorm_fwd (store_rstd) and rmsnorm_bwd" + what)

for name, offset in (("quack_rmsnorm_residual", 0.0), ("quack_rmsnorm_residual_gemma", 1.0)):
    forward, backward = _residual_variant(offset)
    ulpcheck.fused_add_rmsnorm(name, forward=forward, backward=backward, backend="cuda", aligned_rows=True,
                               cols=(64, 1000, 4096, 5120, 8192), compiles_per_shape=True, fp32_weights=True,
                               fp32_residual=True, sum="fp32", weight_offset=offset,
                               libraries=("torch", "quack", "cutlass"),
                               description="quack's CuTe DSL rmsnorm(residual=, residual_dtype=, prenorm=True), "
                                           f"weight_offset={offset}: the norm of the fp32 sum")
