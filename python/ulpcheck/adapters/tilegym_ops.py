"""TileGym's cuTile RMSNorm (forward and its persistent backward) and its
Liger-suite fused add + RMSNorm (forward and backward).

    ulpcheck run --python python/ulpcheck/adapters/tilegym_ops.py --op rmsnorm
    ulpcheck run --python python/ulpcheck/adapters/tilegym_ops.py --op fused_add_rmsnorm

TileGym 1.5.1 with cuda-tile 1.7.0 (ci/install-python-kernels installs them
and the CUDA 13.4 tileiras toolchain cuTile compiles with). The specs they
implement, read from its source:

tilegym/ops/cutile/rms_norm.py (`rms_norm`, the seed document's kernel,
TileGym PR #29, now a persistent backward):
- tilegym_rms_norm: y = RN_T((f(x) rstd) (offset + f(w))), fp32 math and one
  rounding (:52, :97, :178), rstd = rsqrt(sum(x^2) / N + eps) in fp32 (:45,
  :87, :163): the plain spec. The weight is read in its own dtype and cast
  (:49, :93, :135) and dw returned in it (:303): fp32 weights too. Its
  backward (_rms_bwd_kernel :191-229, _rms_norm_backward :270-303) consumes
  the rstd its forward saved: dx = RN_T((w dy - x-hat c) rstd) (:226), dw
  the torch sum of one fp32 partial per CTA (:227, :299), the grid a
  function of M and N alone (_bwd_tiles, :232-246): deterministic. Called through its autograd Function, as training calls
  it, so the rstd the backward reads is the forward's own.
  Not batch invariant: with mode=None the forward switches kernels on M
  (static persistent when M > 2 x the SM count, else one CTA a row, :361-366),
  whose row sums are different reduction trees; the backward's rows per CTA
  switch on M too (:235-240).
  Hidden sizes to 16,384, the range its PR benchmarked: the static persistent
  forward and the backward hold a row's next_pow2(N) columns in one tile.
- tilegym_rms_norm_gemma: offset 1.0 (Gemma's 1 + w, formed in fp32 at :52,
  :97, :175-178), forward only: its backward raises for an offset (:456-459).
Both make x contiguous first (:277, :344): strided rows reach it as copies.

tilegym/suites/liger/cutile/fused_add_rms_norm.py (`fused_add_rms_norm`,
FusedAddRMSNormCuTileFunction):
- tilegym_fused_add_rms_norm (casting_mode "gemma", offset 0) and _gemma
  (offset 1.0): S = X + R added in the tile dtype and stored (:118-122,
  :159-160; S is empty_like(X), :533, so R must be X's dtype: no fp32
  residual), the variance of that rounded S in fp32, Y = RN((S rstd)
  (f(W) + offset)) (:135-137, :182-184): the spec's sum="rounded". W is cast
  to fp32: fp32 weights too. Backward (:274-367; the 2-chunk kernel :371-511):
  m = f(dY) (f(W) + offset), dX = rstd m - rstd^3/n sum(m S) S + dS_out in
  fp32, stored once in X's dtype (:349-350) and returned as both dX and dR
  (:618, :687); dW from fp32 partials per CTA, summed by torch (:617, :684).
  The CTA count of the backward is chosen by timing on the first call per
  (N, dtype, mode) (exhaustive_search, :235-270, :669-684), so two processes
  may group dW differently; within one it is fixed: deterministic there.
  One CTA a row in the forward and one row a pass in the backward, whatever
  M: declared batch invariant.
- tilegym_fused_add_rms_norm_llama (its default casting_mode), declared
  rounding="llama": S rstd rounded to X's dtype, then times (W + offset) on
  W's dtype tile (:129-130, :178-179). Forward only: its llama backward forms
  m = dY (W + offset) as a product of two X-dtype tiles, rounded to that
  dtype (:326), a rounding ulpcheck's llama spec (Liger's: m in fp32) does
  not have. Weights in x's dtype only (how cuTile promotes an fp32 W there is
  not read from its source).
Hidden sizes: next_pow2(N) <= 65536 (:79-83). Paths: the forward's small
kernel for next_pow2(N) < 2048 and large one above (:541), two column chunks
in both passes for next_pow2(N) > 4096 (:540, :589); the cols below reach
each. The forward's occupancy is autotuned by timing per (N, dtype, mode) on
first use (:198-221), compiling several kernels: compiles_per_shape.
"""

import importlib

import torch

import ulpcheck

rms_norm_ops = importlib.import_module("tilegym.ops.cutile.rms_norm")  # the package re-exports a function of this name
fused_add_ops = importlib.import_module("tilegym.suites.liger.cutile.fused_add_rms_norm")

_libs = ("torch", "tilegym", "cuda.tile")


def _rms_norm(offset):
    def forward(x, w, eps):
        return rms_norm_ops.rms_norm(x, None, w, eps, offset=offset)

    def backward(x, w, dy, rstd, eps):
        # Through its autograd Function, so its backward reads the rstd its forward saved.
        x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        rms_norm_ops.rms_norm(x, None, w, eps, offset=offset).backward(dy)
        return x.grad, w.grad

    return forward, (backward if offset == 0.0 else None)


def _fused_add(offset, mode):
    def forward(x, residual, w, eps):
        return fused_add_ops.fused_add_rms_norm(x, residual, w, eps, offset, mode)

    def backward(x, residual, w, dy, dresidual_out, eps):
        x, residual, w = (t.detach().clone().requires_grad_() for t in (x, residual, w))
        y, s = fused_add_ops.FusedAddRMSNormCuTileFunction.apply(x, residual, w, eps, offset, mode)
        torch.autograd.backward([y, s], [dy, dresidual_out])
        return x.grad, residual.grad, w.grad

    return forward, (backward if mode == "gemma" else None)


for name, offset in (("tilegym_rms_norm", 0.0), ("tilegym_rms_norm_gemma", 1.0)):
    forward, backward = _rms_norm(offset)
    ulpcheck.rmsnorm(name, forward=forward, backward=backward, backend="cuda", fp32_weights=True,
                     weight_offset=offset, batch_invariant=False, cols=(64, 1000, 4096, 5120, 8192, 16384),
                     compiles_per_shape=True, libraries=_libs,
                     description=f"TileGym's cuTile rms_norm (ops/cutile), offset {offset}: fp32 math, one rounding"
                                 + ("; its persistent backward" if backward else "; forward only (no backward "
                                    "with an offset)"))

for name, offset, mode in (("tilegym_fused_add_rms_norm", 0.0, "gemma"),
                           ("tilegym_fused_add_rms_norm_gemma", 1.0, "gemma"),
                           ("tilegym_fused_add_rms_norm_llama", 0.0, "llama")):
    forward, backward = _fused_add(offset, mode)
    ulpcheck.fused_add_rmsnorm(name, forward=forward, backward=backward, backend="cuda",
                               fp32_weights=mode == "gemma", rounding="llama" if mode == "llama" else "plain",
                               weight_offset=offset, cols=(64, 1000, 4096, 8192), compiles_per_shape=True,
                               libraries=_libs,
                               description=f"TileGym's cuTile fused add + RMSNorm (Liger suite), casting_mode="
                                           f"'{mode}', offset {offset}: the norm of the rounded sum"
                                           + ("" if backward else "; forward only"))
