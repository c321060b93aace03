"""Python variants for the Python door's spec declarations (rounding,
weight_offset, stats, bias_variants): each implements one spec of core/norm_spec.h
in fp32 torch on the CPU, the way the libraries that ship it do (Liger's
llama and gemma casting modes, Liger's LayerNorm up to at least 0.8.2 saving
Mean and RSTD in x's dtype, quack's RMSNorm bias), and two get theirs
wrong (Llama declaring the plain spec; a bias added after y's rounding), so
the suite sees a declaration judged, not just accepted."""

import torch

import ulpcheck


def _rstd(xf, eps):
    return torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


def _rms_backward(x, w, dy, rstd, offset, llama):
    """dx = r (a - xhat mean(a xhat)) with a = (offset + w) dy in fp32, dw =
    sum_i dy xhat. Llama (Liger's llama mode) forms each dw term dy
    round(xhat), a product of two x-dtype tensors, in that dtype."""
    xf, r = x.float(), rstd.float().unsqueeze(-1)
    xhat = xf * r
    a = (offset + w.float()) * dy.float()
    dx = r * (a - xhat * (a * xhat).mean(-1, keepdim=True))
    terms = (dy * xhat.to(x.dtype)).float() if llama else dy.float() * xhat
    return dx.to(x.dtype), terms.sum(0).to(w.dtype)


def llama_forward(x, w, eps):
    # Liger's casting_mode="llama": x rstd rounded to x's dtype, then times w in fp32, rounded again.
    xf = x.float()
    r = _rstd(xf, eps)
    return ((xf * r).to(x.dtype).float() * w.float()).to(x.dtype), r.squeeze(-1)


def llama_backward(x, w, dy, rstd, eps):
    return _rms_backward(x, w, dy, rstd, 0.0, llama=True)


def gemma_forward(x, w, eps):
    # Liger's casting_mode="gemma" with offset 1 (HF's GemmaRMSNorm): fp32 throughout, one rounding.
    xf = x.float()
    r = _rstd(xf, eps)
    return (xf * r * (1.0 + w.float())).to(x.dtype), r.squeeze(-1)


def gemma_backward(x, w, dy, rstd, eps):
    return _rms_backward(x, w, dy, rstd, 1.0, llama=False)


def biased_forward(x, w, eps, bias=None):
    # quack's rmsnorm(bias=): y = x rstd w + b in fp32, one rounding.
    xf = x.float()
    r = _rstd(xf, eps)
    y = xf * r * w.float()
    return (y if bias is None else y + bias.float()).to(x.dtype), r.squeeze(-1)


def biased_backward(x, w, dy, rstd, eps, has_bias=False):
    dx, dw = _rms_backward(x, w, dy, rstd, 0.0, llama=False)
    return (dx, dw, dy.float().sum(0).to(w.dtype)) if has_bias else (dx, dw)


def bias_after_rounding_forward(x, w, eps, bias=None):
    # The bug: y rounded to x's dtype, then the bias added and rounded again.
    y, r = biased_forward(x, w, eps)
    return (y if bias is None else (y.float() + bias.float()).to(x.dtype)), r


def layer_norm_x_dtype_stats_forward(x, gamma, beta, eps):
    # fp32 statistics for y; Mean and RSTD saved in x's dtype.
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt((xf - mean).pow(2).mean(-1, keepdim=True) + eps)
    y = ((xf - mean) * rstd * gamma.float() + beta.float()).to(x.dtype)
    return y, mean.squeeze(-1).to(x.dtype), rstd.squeeze(-1).to(x.dtype)


def layer_norm_x_dtype_stats_backward(x, gamma, dy, mean, rstd, eps):
    # x-hat rebuilt from the saved, rounded statistics, then fp32 throughout.
    assert mean.dtype == x.dtype and rstd.dtype == x.dtype, "given the statistics in the dtype they were saved in"
    xf, m, r = x.float(), mean.float().unsqueeze(-1), rstd.float().unsqueeze(-1)
    xhat = (xf - m) * r
    a = gamma.float() * dy.float()
    dx = r * (a - a.mean(-1, keepdim=True) - xhat * (a * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dy.float() * xhat).sum(0).to(gamma.dtype), dy.float().sum(0).to(gamma.dtype)


_16 = ("bf16", "fp16")
ulpcheck.rmsnorm("py_llama_rms_norm", forward=llama_forward, backward=llama_backward, backend="host",
                 saves_stats=True, rounding="llama", fp32_weights=True,
                 description="Llama's rounding point (Liger's casting_mode='llama'), fp32 torch on the CPU")
ulpcheck.rmsnorm("py_llama_rms_norm_declared_plain", forward=llama_forward, backward=llama_backward, backend="host",
                 saves_stats=True, dtypes=_16,
                 description="the Llama kernel declaring the plain spec: must fail accuracy in 16 bits")
ulpcheck.rmsnorm("py_gemma_rms_norm", forward=gemma_forward, backward=gemma_backward, backend="host",
                 saves_stats=True, weight_offset=1.0, fp32_weights=True,
                 description="Gemma's offset weight, 1 + w in fp32 (Liger's casting_mode='gemma', offset 1)")
# An inference kernel without a backward (FlashInfer's gemma_rmsnorm): judged on y alone.
ulpcheck.rmsnorm("py_gemma_rms_norm_forward_only", forward=lambda x, w, eps: gemma_forward(x, w, eps)[0], backward=None,
                 backend="host", weight_offset=1.0,
                 description="Gemma's offset weight, forward only, rstd not saved")
ulpcheck.layernorm("py_layer_norm_x_dtype_stats", forward=layer_norm_x_dtype_stats_forward,
                   backward=layer_norm_x_dtype_stats_backward, backend="host", saves_stats=True,
                   two_pass_statistics=True, stats="activation",
                   description="LayerNorm saving Mean and RSTD in x's dtype (Liger up to 0.8.2), x-hat rebuilt from them")
ulpcheck.rmsnorm("py_rms_norm_bias", forward=biased_forward, backward=biased_backward, backend="host",
                 saves_stats=True, fp32_weights=True, bias_variants=True,
                 description="RMSNorm with and without a bias (quack's bias=), fp32 torch on the CPU")
ulpcheck.rmsnorm("py_rms_norm_bias_after_rounding", forward=bias_after_rounding_forward, backward=biased_backward,
                 backend="host", saves_stats=True, bias_variants=True, dtypes=_16,
                 description="a bias added after y's rounding to x's dtype: must fail accuracy in 16 bits")
