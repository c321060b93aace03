"""Fused add + RMSNorm variants run as captured CUDA graphs (cuda_graphs=True),
for the first-call check on the GPU: one right on every replay, and one wrong
on each graph's first replay only and right afterwards (aiter #4888's class:
state its capture left behind, which the first replay consumes)."""

import torch

import ulpcheck


def norm_of_rounded_sum(x, residual, w, eps):
    residual_out = (x.float() + residual.float()).to(residual.dtype)
    rf = residual_out.float()
    y = rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return y.to(x.dtype), residual_out


ulpcheck.fused_add_rmsnorm("py_cuda_fused_add_graphs", forward=norm_of_rounded_sum, backend="cuda",
                           dtypes=("fp32", "bf16"), cuda_graphs=True)


_flags_set_by_warm_up = {}  # the static x's address -> a device flag its eager warm-up call set
_flags_in_graphs = []       # kept alive: a captured graph reads and clears them on every replay


def wrong_on_first_replay(x, residual, w, eps):
    y, residual_out = norm_of_rounded_sum(x, residual, w, eps)
    if not torch.cuda.is_current_stream_capturing():
        # The warm-up call before the capture: as a library that lazily sets up
        # a workspace marked "not yet initialised" outside the graph.
        _flags_set_by_warm_up[x.data_ptr()] = torch.ones((), dtype=y.dtype, device=y.device)
        return y, residual_out
    flag = _flags_set_by_warm_up.pop(x.data_ptr(), None)
    if flag is not None:
        # Captured: while the flag is set, y[0, 0] one ulp up; then the flag is
        # cleared. So the first replay is wrong and every later one right.
        up = torch.nextafter(y[0, 0], torch.full((), float("inf"), dtype=y.dtype, device=y.device))
        y[0, 0] = torch.where(flag != 0, up, y[0, 0])
        flag.zero_()
        _flags_in_graphs.append(flag)
    return y, residual_out


ulpcheck.fused_add_rmsnorm("py_cuda_fused_add_wrong_on_first_replay", forward=wrong_on_first_replay, backend="cuda",
                           dtypes=("fp32",), cuda_graphs=True)
