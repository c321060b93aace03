"""PyTorch's CUDA LayerNorm on the CPU, for the running_means declaration:
its statistics as aten/src/ATen/native/cuda/layer_norm_kernel.cu forms them
(torch 2.11) in fp32 — the vectorized compute_stats where N is a multiple of
4 (128 lanes, lane t runs cuWelfordOnlineSum, mean + delta * fl(1/count),
over the vectors of 4 elements t, t + 128, ...; then 5 levels of shuffle-down
cuWelfordCombine in each of 4 warps and 2 across them, the weighted form
from coef = fl(1/count)), RowwiseMoments elsewhere (512 lanes, WelfordOps'
mean + delta / n and its combine, a.mean + delta * (n_b / n), in 5 + 4
levels); y = gamma (rstd (x - mean)) + beta from those very values; the
backward's x-hat from the statistics it is given, its row sums over 128
lanes then 7 levels. Registered as the adapter declares PyTorch's
(row_depth=(128, 14), running_means=(128, 4, 9), running_merges=
"update_unless_vectorized", uses_saved_statistics), with the shape
undeclared, and as one serial Welford chain over the row sorted, falsely
declared with PyTorch's shape; and RowwiseMoments' tree merged by
cuWelfordCombine's weighted average, falsely declared update-form merges."""

import numpy as np
import torch

import ulpcheck

f32 = np.float32


def _welford_lanes(x, lanes, vector, division):
    """Each lane's (mean, m2, count) after Welford's update over its chain."""
    m, n = x.shape
    steps = -(-n // (lanes * vector))
    padded = np.zeros((m, steps * lanes * vector), dtype=f32)
    padded[:, :n] = x
    chunks = padded.reshape(m, steps, lanes, vector)
    mean = np.zeros((m, lanes), dtype=f32)
    m2 = np.zeros((m, lanes), dtype=f32)
    count = np.zeros((m, lanes), dtype=f32)
    for s in range(steps):
        for e in range(vector):
            live = (s * lanes + np.arange(lanes)) * vector + e < n  # the lanes that hold an element here
            val = chunks[:, s, :, e]
            delta = val - mean
            new_count = count + f32(1)
            new_mean = mean + delta / new_count if division else mean + delta * (f32(1) / new_count)
            new_m2 = m2 + delta * (val - new_mean)
            mean = np.where(live, new_mean, mean)
            m2 = np.where(live, new_m2, m2)
            count = np.where(live, new_count, count)
    return mean, m2, count


def _combine_weighted(a, b):
    """cuWelfordCombine(a, b): an empty pair gives zeros."""
    (ma, sa, ca), (mb, sb, cb) = a, b
    delta = mb - ma
    count = ca + cb
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = f32(1) / count
        na, nb = ca * coef, cb * coef
        mean = na * ma + nb * mb
        m2 = sa + sb + delta * delta * ca * nb
    live = count > 0
    return np.where(live, mean, f32(0)), np.where(live, m2, f32(0)), count


def _combine_update(a, b):
    """WelfordOps::combine(a, b): an empty side returns the other."""
    (ma, sa, ca), (mb, sb, cb) = a, b
    delta = mb - ma
    count = ca + cb
    with np.errstate(divide="ignore", invalid="ignore"):
        nb_over_n = cb / count
        mean = ma + delta * nb_over_n
        m2 = sa + sb + delta * delta * ca * nb_over_n
    mean = np.where(ca == 0, mb, np.where(cb == 0, ma, mean))
    m2 = np.where(ca == 0, sb, np.where(cb == 0, sa, m2))
    return mean, m2, count


def _tree(lanes_state, combine):
    """Shuffle-down levels within warps of 32 lanes, then across the warps' first lanes."""
    mean, m2, count = (np.array(v) for v in lanes_state)
    lanes = mean.shape[1]
    for w in range(lanes // 32):
        offset = 16
        while offset >= 1:
            lo = slice(w * 32, w * 32 + offset)
            hi = slice(w * 32 + offset, w * 32 + 2 * offset)
            mean[:, lo], m2[:, lo], count[:, lo] = combine((mean[:, lo], m2[:, lo], count[:, lo]),
                                                           (mean[:, hi], m2[:, hi], count[:, hi]))
            offset //= 2
    offset = lanes // 64
    while offset >= 1:
        lo = np.arange(offset) * 32
        hi = (np.arange(offset) + offset) * 32
        mean[:, lo], m2[:, lo], count[:, lo] = combine((mean[:, lo], m2[:, lo], count[:, lo]),
                                                       (mean[:, hi], m2[:, hi], count[:, hi]))
        offset //= 2
    return mean[:, 0], m2[:, 0]


def torch_cuda_statistics(x):
    """PyTorch's CUDA row statistics of fp32 x: (mean, m2)."""
    if x.shape[1] % 4 == 0:
        return _tree(_welford_lanes(x, 128, 4, division=False), _combine_weighted)
    return _tree(_welford_lanes(x, 512, 1, division=True), _combine_update)


def weighted_merges_statistics(x):
    """PyTorch's rowwise lanes and tree, merged by cuWelfordCombine's weighted
    average on every row: a constant row's mean may move (not the update form)."""
    return _tree(_welford_lanes(x, 512, 1, division=True), _combine_weighted)


def serial_sorted_statistics(x):
    """One Welford chain over each row sorted ascending (its running mean lags the most)."""
    mean, m2, _ = _welford_lanes(np.sort(x, axis=1), 1, 1, division=True)
    return mean[:, 0], m2[:, 0]


def _forward_with(statistics):
    def forward(x, gamma, beta, eps):
        xf = x.float().numpy()
        n = xf.shape[1]
        mean, m2 = statistics(xf)
        rstd = f32(1) / np.sqrt(m2 * (f32(1) / f32(n)) + f32(eps))
        y = rstd[:, None] * (xf - mean[:, None])
        if gamma is not None:
            y = gamma.float().numpy() * y
        if beta is not None:
            y = y + beta.float().numpy()
        return torch.from_numpy(y).to(x.dtype), torch.from_numpy(mean), torch.from_numpy(rstd)
    return forward


def _row_sum(t):
    """fp32 row sums as compute_gI forms them: 128 lanes' serial chains, then 7 levels."""
    m, n = t.shape
    steps = -(-n // 128)
    padded = np.zeros((m, steps * 128), dtype=f32)
    padded[:, :n] = t
    acc = np.zeros((m, 128), dtype=f32)
    for s in range(steps):
        acc = acc + padded[:, s * 128:(s + 1) * 128]
    width = 64
    while width >= 1:
        acc = acc[:, :width] + acc[:, width:2 * width]
        width //= 2
    return acc[:, 0]


def backward(x, gamma, dy, mean, rstd, eps):
    xf, dyf = x.float().numpy(), dy.float().numpy()
    n = xf.shape[1]
    r = rstd.numpy()[:, None]
    xhat = (xf - mean.numpy()[:, None]) * r
    a = dyf * gamma.float().numpy() if gamma is not None else dyf
    inv_n = f32(1) / f32(n)
    c1 = (_row_sum(a) * inv_n)[:, None]
    c2 = (_row_sum(a * xhat) * inv_n)[:, None]
    dx = r * (a - c1 - xhat * c2)
    if gamma is None:
        return torch.from_numpy(dx).to(x.dtype), None, None
    # The column sums in double, then rounded once: any order's depth holds them.
    dgamma = torch.from_numpy(dyf * xhat).double().sum(0).to(gamma.dtype)
    dbeta = torch.from_numpy(dyf).double().sum(0).to(gamma.dtype)
    return torch.from_numpy(dx).to(x.dtype), dgamma, dbeta


_torch_declared = dict(backend="host", saves_stats=True, uses_saved_statistics=True, row_depth=(128, 14),
                       affine_variants=True)
ulpcheck.layernorm("torch_cuda_layer_norm_on_cpu", forward=_forward_with(torch_cuda_statistics), backward=backward,
                   running_means=(128, 4, 9), running_merges="update_unless_vectorized", **_torch_declared)
ulpcheck.layernorm("torch_cuda_layer_norm_on_cpu_undeclared", forward=_forward_with(torch_cuda_statistics),
                   backward=backward, **_torch_declared)
ulpcheck.layernorm("serial_sorted_welford_declared_as_torch", forward=_forward_with(serial_sorted_statistics),
                   backward=backward, running_means=(128, 4, 9), **_torch_declared)
ulpcheck.layernorm("weighted_merges_declared_update", forward=_forward_with(weighted_merges_statistics),
                   backward=backward, running_means=(512, 1, 9), running_merges="update", **_torch_declared)
