"""Multi-rank Python variants for the multi-rank door's suites (gloo on the
host, one process per rank): each right but for what one rank does in one
shape regime."""

import os
import time

import torch
import torch.distributed as dist

import ulpcheck


def allreduce_add_norm(x, residual, w, eps, ranks):
    s = torch.empty(x.shape, dtype=torch.float32).copy_(x)  # all_reduce works in place: never on x itself
    dist.all_reduce(s)
    residual_out = s.to(x.dtype) + residual
    h = residual_out.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype), residual_out


def rank1_dies_at_n7(x, residual, w, eps, ranks):
    # Rank 1's process ends mid-call; rank 0 is left in all_reduce, waiting for it.
    if ranks.rank == 1 and x.shape[1] == 7:
        os._exit(3)
    return allreduce_add_norm(x, residual, w, eps, ranks)


def rank1_hangs_at_n5(x, residual, w, eps, ranks):
    if ranks.rank == 1 and x.shape[1] == 5:
        time.sleep(3600)
    return allreduce_add_norm(x, residual, w, eps, ranks)


def rank1_adds_its_partial_twice(x, residual, w, eps, ranks):
    # A rank whose result differs from its peers': rank_consistency's.
    y, residual_out = allreduce_add_norm(x, residual, w, eps, ranks)
    if ranks.rank == 1:
        residual_out = residual_out + x
    return y, residual_out


def sum_in_x_dtype_in_rank_order(x, residual, w, eps, ranks):
    # FlashInfer's fp32_acc=False: each rank's partial added to the running
    # sum in x's dtype, in rank order, each add rounded (an fp32 add of two
    # 16-bit values rounds to them as one rounding would). Gathered widened:
    # Debian's torch 1.13 gloo has no bf16.
    parts = [torch.empty(x.shape, dtype=torch.float32) for _ in range(ranks.world_size)]
    dist.all_gather(parts, x.float())
    s = parts[0].to(x.dtype)
    for p in parts[1:]:
        s = (s.float() + p).to(x.dtype)
    residual_out = (s.float() + residual.float()).to(residual.dtype)
    h = residual_out.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype), residual_out


# The same kernel declared (allreduce_acc="activation") and not: from three
# ranks on only the declared spec is its own.
for name, acc in (("py_allreduce_sum_in_x_dtype", "activation"), ("py_allreduce_sum_in_x_dtype_undeclared", "fp32")):
    ulpcheck.allreduce_rmsnorm(name, forward=sum_in_x_dtype_in_rank_order, backend="host", ranks=(3, 4),
                               dtypes=("bf16", "fp16"), allreduce_acc=acc, batch_invariant=False)

for name, forward in (("py_allreduce_rank1_dies_at_n7", rank1_dies_at_n7),
                      ("py_allreduce_rank1_hangs_at_n5", rank1_hangs_at_n5),
                      ("py_allreduce_rank1_adds_its_partial_twice", rank1_adds_its_partial_twice)):
    ulpcheck.allreduce_rmsnorm(name, forward=forward, backend="host", ranks=(2,), dtypes=("fp32",),
                               batch_invariant=False)
