"""Allreduce + residual add + RMSNorm across ranks, through the Python door
(the multi-rank door): a tensor-parallel layer's epilogue.

forward(x, residual, w, eps, ranks) -> (y, residual_out), called on every
rank at once, each rank in a worker process of its own that has joined a
torch.distributed process group (NCCL, rank r on GPU r; gloo on the host)
before its first call. x is this rank's partial (every rank's differs),
residual and w are the same on every rank; every rank must return the same
bits:

    s            = the sum of every rank's x, rounded to x's dtype once (in
                   any order: an fp32 sum), or, for a variant that declares
                   allreduce_acc="activation", added to the running sum in
                   x's dtype one rank at a time in rank order, each add
                   rounded (FlashInfer's fp32_acc=False; the same with two
                   ranks)
    residual_out = s + residual, in the residual's dtype (x's, or fp32 in
                   cases of a variant that declares fp32_residual=True)
    y            = the RMSNorm of residual_out (weight offset applied)

ranks (a Ranks) says which rank this is, of how many, the process group
(ranks.group, torch.distributed's default group) and the device. x and
residual are ulpcheck's buffers: a library that writes into its inputs is
called on clones.
"""

import dataclasses
from typing import Any

from . import Op, SpecOption, norm
from .fused_add_rmsnorm import FP32_RESIDUAL

# The dtype the ranks' partials are summed in: "fp32" or "activation".
ALLREDUCE_ACC = SpecOption("allreduce_acc", "fp32", norm.one_of("allreduce_acc", ("fp32", "activation")))


@dataclasses.dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    generation: int         # the call's epoch: the same on every rank, increasing call to call
    device: Any             # torch.device of this rank's tensors
    group: Any = None       # the torch.distributed process group (None: the default group)


def forward(variant, call):
    y, residual_out = variant.forward(call.act("x"), call.residual("residual"), call.vec("w"), call.eps, call.ranks())
    call.store("y", y, call.act("y"))
    call.store("residual_out", residual_out, call.residual("residual_out"))


def valid_ranks(v):
    if any(not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= 8 for r in v.ranks):
        return f"ranks must be world sizes from 1 to 8, not {v.ranks!r}"
    return None


OP = Op(name="allreduce_rmsnorm",
        spec_options=(norm.FP32_WEIGHTS, norm.WEIGHT_OFFSET, FP32_RESIDUAL, ALLREDUCE_ACC),
        rules=(norm.no_layernorm_statistics, valid_ranks),
        multi_rank=True,
        entries={"allreduce_rmsnorm_forward": forward})
