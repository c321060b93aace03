"""Two RMSNorms in PyTorch on the CPU, registered with ulpcheck: one computes
in fp32 as the spec says, one in the activation dtype (x^2 and its mean in
bf16/fp16: the class of bug of PyTorch #133085 and Liger PR #950)."""

import torch

import ulpcheck


def rms_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rms_norm_in_activation_dtype(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def backward_of(forward):
    def backward(x, w, dy, rstd, eps):
        inputs = (x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_())
        return torch.autograd.grad(forward(*inputs, eps), inputs, dy)
    return backward


ulpcheck.rmsnorm("my_rms_norm", forward=rms_norm, backward=backward_of(rms_norm), backend="host")
# bf16 only: the CPU torch of Debian 12 (1.13) has no fp16 rsqrt.
ulpcheck.rmsnorm("my_rms_norm_in_activation_dtype", forward=rms_norm_in_activation_dtype,
                 backward=backward_of(rms_norm_in_activation_dtype), backend="host", dtypes=("bf16",))
