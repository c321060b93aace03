"""FlashInfer's fused allreduce + residual + RMSNorm, through the multi-rank door.

    ulpcheck run --python python/ulpcheck/adapters/flashinfer_comm.py --op allreduce_rmsnorm

flashinfer.comm.trtllm_allreduce_fusion (flashinfer-python 0.7.2.post1,
comm/trtllm_ar.py; kernel include/flashinfer/comm/trtllm_allreduce_fusion.cuh,
"cuh" below), pattern kARResidualRMSNorm, one process per rank (ulpcheck's
rank workers, a torch.distributed NCCL group: the workspace's IPC handles
are exchanged through it). Its first use JIT-compiles the trtllm_comm module
with nvcc (~264 s on an H200 machine; later processes reuse the cache): warm
it once before a campaign (the worker's start and a call are held to 120 s
and --case-timeout).

The spec (../shared/research/fused-family-specs.md §3, measured on 2 x H200):
s = the ranks' partials summed in rank order, rounded to T (fp32_acc=True:
in fp32, one rounding; False: rounded after each rank, which with two ranks
is the same one rounding, cuh:812-821, 1457-1482); residual_out = RN_T(s +
residual) (cuh:1105-1120); norm_out = RN_T(residual_out rsqrt(mean + eps)
(weight_bias + gamma)) with the sum of squares in fp32 (cuh:1292-1329): the
unfused pipeline's spec, which ulpcheck's allreduce_rmsnorm is. Its
residual_out owes ulpcheck's NCCL pipeline (nccl_unfused) its bits in every
row the spec determines (fused_vs_unfused); norm_out's reduction tree
differs. Weights (rms_gamma) are read as T (cuh:1080): weights in x's
dtype only. The launch's cluster shape follows the token count (cuh:1704-
1855): norm_out is not batch invariant; no atomics: deterministic.

What the kernel takes (found in the source, not checked by it): rows
contiguous and 16-byte aligned (int4 loads, csrc/trtllm_allreduce_fusion.cu:
55-71: raw data_ptrs); H % 8 == 0 at 16 bits, % 4 at fp32 (cuh:1709); H/VEC
= block x cluster with block <= 1024 (cuh:1733-1741, 1836), so the largest
H is 65536 at 16 bits, 32768 at fp32; two-shot asserts more tokens than
ranks (trtllm_ar.py:853-854: min_rows). use_oneshot is passed explicitly so
each variant reaches its strategy at every size (None picks one-shot while
T x H x 2 x world x itemsize <= {2: 512, 4: 64, 8: 42} MiB, trtllm_ar.py:
712-725, which every default-tier case is below at 2 and 4 ranks; True is
overridden only past MAX_COMM_SIZE, far beyond these cases);
flashinfer_allreduce_fusion_auto passes None and crosses that threshold in
nightly-tier cases and repros of its size. One workspace
per rank for every call of a (world size, activation width): max_token_num
x hidden_dim bounds token_num x H only (trtllm_ar.py:753-758). Its Lamport
slots stay far below 2^30 bytes, except in the production-sized variant
below: from 2^30 up, the slot the one-shot kernel clears is computed in 32
bits (cuh:975) and wraps.
One-shot sends -0 as +0 (-0 marks "not arrived", cuh:1442-1448, 1544):
where every rank's partial and the residual are -0, its residual_out is +0
where the spec's is -0.
"""

import importlib

import torch
import torch.distributed as dist

import ulpcheck

ar = importlib.import_module("flashinfer.comm.trtllm_ar")

# Hidden sizes spanning FlashInfer's range, each valid at every dtype the
# variant declares (H = VEC m launches iff m / 2^min(v2(m), 3) <= 1024):
# 1000 (odd m), 2880 (gpt-oss), 4096, 5120, 7168, 8184, 8192, 16368, 16384,
# 28672, 32736, 32768, and 65536 (the largest) at 16 bits.
_COLS_16 = (16, 1000, 2880, 4096, 5120, 7168, 8184, 8192, 16368, 16384, 28672, 32736, 65536)
_COLS_32 = (16, 1000, 2880, 4096, 5120, 7168, 8184, 8192, 16368, 16384, 28672, 32736, 32768)

# token_num x H of the largest call: the default tier's 2^18 elements, and
# the larger batches batch invariance places a case's rows in.
_MAX_ELEMENTS = 1 << 21
_MAX_HIDDEN = 65536
_workspaces = {}  # (world size, fp32 activations, max_token_num) -> (ipc handles, workspace pointers, metadata)

# A production-sized workspace: one Lamport slot (world x max_token_num x
# hidden_dim elements, trtllm_ar.py:481-485) of 2^30 bytes, as 8 ranks x 8192
# tokens x H 8192 at 16 bits give. Slot k starts at k x comm_size, which the
# one-shot kernel computes with a 64-bit product for the slot it writes
# (cuh:972-973) and a 32-bit one for the slot it clears (cuh:975).
_PRODUCTION_SLOT_BYTES = 1 << 30


def _max_tokens(ranks, fp32, production_size):
    if not production_size:
        return _MAX_ELEMENTS // _MAX_HIDDEN
    return _PRODUCTION_SLOT_BYTES // (ranks.world_size * _MAX_HIDDEN * (4 if fp32 else 2))


def _max_tokens_for_call(tokens, hidden):
    """A workspace fitted to one call: the fewest tokens of H 65536 holding
    token_num x H, rounded up to a power of two of elements (from the default
    workspace's 2^21), so calls of one size class share it."""
    elements = max(_MAX_ELEMENTS, 1 << (tokens * hidden - 1).bit_length())
    return elements // _MAX_HIDDEN


def _workspace(ranks, fp32, max_tokens):
    key = (ranks.world_size, fp32, max_tokens)
    if key not in _workspaces:
        _workspaces[key] = ar.trtllm_create_ipc_workspace_for_all_reduce_fusion(
            tp_rank=ranks.rank, tp_size=ranks.world_size, max_token_num=max_tokens, hidden_dim=_MAX_HIDDEN,
            use_fp32_lamport=fp32, group=dist.group.WORLD, create_metadata=True)
    return _workspaces[key]


def _fusion(oneshot, fp32_acc, production_size=False, fitted_to_call=False):
    def forward(x, residual, w, eps, ranks):
        tokens, hidden = x.shape
        fp32 = x.dtype == torch.float32
        max_tokens = (_max_tokens_for_call(tokens, hidden) if fitted_to_call else
                      _max_tokens(ranks, fp32, production_size))
        _, workspace, metadata = _workspace(ranks, fp32, max_tokens)
        residual_out = torch.empty_like(residual)
        norm_out = torch.empty_like(x)
        ar.trtllm_allreduce_fusion(
            allreduce_in=x, world_size=ranks.world_size, world_rank=ranks.rank, token_num=tokens, hidden_dim=hidden,
            workspace_ptrs=workspace, launch_with_pdl=False, trigger_completion_at_end=True, fp32_acc=fp32_acc,
            pattern_code=ar.AllReduceFusionPattern.kARResidualRMSNorm, use_oneshot=oneshot, allreduce_out=None,
            residual_in=residual, residual_out=residual_out, norm_out=norm_out, quant_out=None, scale_out=None,
            rms_gamma=w, rms_eps=eps, scale_factor=None, layout_code=None, metadata=metadata)
        return norm_out, residual_out
    return forward


# fp32_acc=False adds each rank's partial to the running sum in the
# activation dtype, in rank order, rounding after each add (cuh:1457-1482):
# the spec allreduce_acc="activation" (with two ranks the same as one
# rounding of the exact sum; with four, 1 to 8 ulp from it in residual_out,
# measured on 4 x H200). fp32_acc=True and fp32 activations sum in fp32.
def _acc(fp32_sum):
    return "fp32" if fp32_sum else "activation"


# Two-shot launches H/VEC threads a block at most and refuses fewer than the
# world size (cuh:1835, "block_size < nranks"): H = 16 is 2 vectors at 16 bits.
def _two_shot_cols(cols):
    return tuple(c for c in cols if c > 16)


for strategy, oneshot in (("oneshot", True), ("twoshot", False)):
    common = dict(backend="cuda", ranks=(2, 4, 8), contiguous_rows=True, aligned_rows=True, batch_invariant=False,
                  min_rows=0 if oneshot else 9,  # > world size: 8 ranks at most here
                  unfused_pipeline="nccl_unfused", bitwise_with_unfused=("residual_out",),
                  libraries=("torch", "flashinfer"))
    for suffix, fp32_acc, dtypes, cols in (("", False, ("bf16", "fp16"), _COLS_16),
                                           ("_fp32_acc", True, ("bf16", "fp16"), _COLS_16),
                                           ("_fp32", False, ("fp32",), _COLS_32)):
        ulpcheck.allreduce_rmsnorm(
            f"flashinfer_allreduce_fusion_{strategy}{suffix}", forward=_fusion(oneshot, fp32_acc), dtypes=dtypes,
            cols=cols if oneshot else _two_shot_cols(cols), allreduce_acc=_acc(fp32_acc or dtypes == ("fp32",)),
            **common,
            description=f"flashinfer.comm.trtllm_allreduce_fusion, kARResidualRMSNorm, use_oneshot={oneshot}, "
                        f"fp32_acc={fp32_acc}")

# One-shot with a production-sized workspace (its cases stay at the default
# tier's sizes, far inside it): the slot it clears is computed in 32 bits
# (cuh:975), 2 x 2^30 wraps, and every third call reads a slot never
# cleared (docs/external-kernels.md). A defect of FlashInfer 0.7.2.post1:
# this variant fails rank consistency, determinism and accuracy.
ulpcheck.allreduce_rmsnorm(
    "flashinfer_allreduce_fusion_oneshot_production_workspace", forward=_fusion(True, False, production_size=True),
    dtypes=("bf16", "fp16"), cols=_COLS_16, backend="cuda", ranks=(2, 4, 8), allreduce_acc=_acc(False),
    contiguous_rows=True, aligned_rows=True, batch_invariant=False, unfused_pipeline="nccl_unfused",
    bitwise_with_unfused=("residual_out",), libraries=("torch", "flashinfer"),
    description="flashinfer_allreduce_fusion_oneshot with a workspace of 2^30-byte Lamport slots "
                "(8 ranks x 8192 tokens x H 8192 at 16 bits)")

# FlashInfer's own choice of strategy (use_oneshot=None, trtllm_ar.py:848-
# 851): one-shot while T x H x 2 x world x itemsize <= {2: 512, 4: 64, 8:
# 42} MiB (712-725), two-shot above. At 2 ranks and 16 bits the threshold is
# T x H = 2^26: 8192 x 8192 and 1024 x 65536 go one-shot, 8193 x 8192 and
# 1025 x 65536 two-shot (at 4 ranks 2^22; fp32 halves both). The default
# tier's 2^18 elements stay on the one-shot side; a nightly-tier campaign or
# a repro of such a shape crosses it. Each call's workspace is fitted to it
# (_max_tokens_for_call), as a deployment sizes one to its largest batch, so
# a one-shot call here never has 2^30-byte Lamport slots (at 2 ranks one-shot
# takes T x H <= 2^26: slots of 2^28 bytes at most) and the threshold is
# crossed without meeting the defect above.
ulpcheck.allreduce_rmsnorm(
    "flashinfer_allreduce_fusion_auto", forward=_fusion(None, False, fitted_to_call=True), dtypes=("bf16", "fp16"),
    cols=_COLS_16, backend="cuda", ranks=(2, 4, 8), allreduce_acc=_acc(False), contiguous_rows=True,
    aligned_rows=True, batch_invariant=False, unfused_pipeline="nccl_unfused", bitwise_with_unfused=("residual_out",),
    libraries=("torch", "flashinfer"),
    description="flashinfer.comm.trtllm_allreduce_fusion, kARResidualRMSNorm, use_oneshot=None (FlashInfer's "
                "threshold: two-shot above T x H = 2^26 at 2 ranks), fp32_acc=False, a workspace fitted to each call")
