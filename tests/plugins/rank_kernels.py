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


for name, forward in (("py_allreduce_rank1_dies_at_n7", rank1_dies_at_n7),
                      ("py_allreduce_rank1_hangs_at_n5", rank1_hangs_at_n5),
                      ("py_allreduce_rank1_adds_its_partial_twice", rank1_adds_its_partial_twice)):
    ulpcheck.allreduce_rmsnorm(name, forward=forward, backend="host", ranks=(2,), dtypes=("fp32",),
                               batch_invariant=False)
