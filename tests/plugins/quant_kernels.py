"""An RMSNorm quantized to FP8 through the Python door, as a user's reference
writes it: F.rms_norm's math in fp32, then (y / scale).to(float8_e4m3fn)
(torch's cast: nearest even, NaN past 464). Registered whatever the torch:
on one without float8 dtypes (before 2.1) a call must fail saying so."""

import torch

import ulpcheck


def static_fp8_forward(x, w, scale, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return (y / scale).to(torch.float8_e4m3fn)


ulpcheck.rmsnorm_quant("py_rms_norm_static_fp8", forward=static_fp8_forward, backend="host", fp32_weights=True,
                       overflow="nonfinite", inverse="divide",
                       description="fp32 RMSNorm, then (y / scale).to(float8_e4m3fn), on the CPU")


def fused_add_static_fp8_forward(x, residual, w, scale, eps):
    # FlashInfer's order: the norm of the fp32 sum, residual_out its rounding.
    h = x.float() + residual.float()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return (y / scale).to(torch.float8_e4m3fn), h.to(residual.dtype)


ulpcheck.fused_add_rmsnorm_quant("py_fused_add_rms_norm_static_fp8", forward=fused_add_static_fp8_forward,
                                 backend="host", fp32_weights=True, sum="fp32", overflow="nonfinite",
                                 inverse="divide",
                                 description="x + residual in fp32, its fp32 RMSNorm, then "
                                             "(y / scale).to(float8_e4m3fn), on the CPU")
