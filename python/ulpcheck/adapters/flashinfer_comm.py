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
each variant reaches its strategy (None picks by size, trtllm_ar.py:712-725;
True is overridden only past MAX_COMM_SIZE, far beyond these cases). One
workspace per rank for every call of a (world size, activation width):
max_token_num x hidden_dim bounds token_num x H only (trtllm_ar.py:753-758),
and its Lamport buffer stays under 2^30 bytes (cuh:975 multiplies in 32 bits).
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
_workspaces = {}  # (world size, fp32 activations) -> (ipc handles, workspace pointers, metadata)


def _workspace(ranks, fp32):
    key = (ranks.world_size, fp32)
    if key not in _workspaces:
        _workspaces[key] = ar.trtllm_create_ipc_workspace_for_all_reduce_fusion(
            tp_rank=ranks.rank, tp_size=ranks.world_size, max_token_num=_MAX_ELEMENTS // _MAX_HIDDEN,
            hidden_dim=_MAX_HIDDEN, use_fp32_lamport=fp32, group=dist.group.WORLD, create_metadata=True)
    return _workspaces[key]


def _fusion(oneshot, fp32_acc):
    def forward(x, residual, w, eps, ranks):
        tokens, hidden = x.shape
        _, workspace, metadata = _workspace(ranks, x.dtype == torch.float32)
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
            cols=cols, **common,
            description=f"flashinfer.comm.trtllm_allreduce_fusion, kARResidualRMSNorm, use_oneshot={oneshot}, "
                        f"fp32_acc={fp32_acc}")
