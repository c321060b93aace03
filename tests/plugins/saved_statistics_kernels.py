"""Python LayerNorms for the uses_saved_statistics declaration: the shape of
Liger's (a plain fp32 sum for the mean, times fl(1/N), which may leave a
near-constant row's mean an ulp off; a two-pass variance about that mean;
y = (x - mean) rstd gamma + beta from the very statistics it returns; the
backward's x-hat rebuilt from the saved ones), registered with and without
the declaration, and one that folds the mean into a bias, as PyTorch's CPU
LayerNorm does (y = x (rstd gamma) + (beta - mean rstd gamma)), falsely
declaring it. fp32 torch on the CPU."""

import torch

import ulpcheck


def _statistics(x, eps):
    xf = x.float()
    n = xf.shape[-1]
    mean = xf.sum(-1, keepdim=True) * (1.0 / n)  # two roundings: within what mean_of_plain_sum allows
    d = xf - mean
    rstd = torch.rsqrt((d * d).sum(-1, keepdim=True) / n + eps)
    return xf, mean, rstd


def forward(x, gamma, beta, eps):
    xf, mean, rstd = _statistics(x, eps)
    y = (xf - mean) * rstd * gamma.float() + beta.float()
    return y.to(x.dtype), mean.reshape(-1), rstd.reshape(-1)


def folded_forward(x, gamma, beta, eps):
    xf, mean, rstd = _statistics(x, eps)
    scale = rstd * gamma.float()
    y = xf * scale + (beta.float() - mean * scale)
    return y.to(x.dtype), mean.reshape(-1), rstd.reshape(-1)


def backward(x, gamma, dy, mean, rstd, eps):
    xf, dyf, g = x.float(), dy.float(), gamma.float()
    r = rstd.reshape(-1, 1)
    xhat = (xf - mean.reshape(-1, 1)) * r
    a = g * dyf
    dx = r * (a - a.mean(-1, keepdim=True) - xhat * (a * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dyf * xhat).sum(0).to(gamma.dtype), dyf.sum(0).to(gamma.dtype)


_declared = dict(backend="host", saves_stats=True, two_pass_statistics=True, mean_of_plain_sum=True)
ulpcheck.layernorm("saved_stats_layer_norm", forward=forward, backward=backward, uses_saved_statistics=True,
                   **_declared)
ulpcheck.layernorm("saved_stats_layer_norm_undeclared", forward=forward, backward=backward, **_declared)
ulpcheck.layernorm("folded_bias_layer_norm", forward=folded_forward, backward=backward, **_declared)
ulpcheck.layernorm("folded_bias_layer_norm_declared", forward=folded_forward, backward=backward,
                   uses_saved_statistics=True, **_declared)
