"""Python variants for the Python door's suites: each correct but for one
defect a library can have, in one shape regime (N = 3, 5 or 7)."""

import ctypes
import time

import torch

import ulpcheck


def rms_forward(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rms_backward(x, w, dy, rstd, eps):
    x = x.detach().clone().requires_grad_()
    w = w.detach().clone().requires_grad_()
    rms_forward(x, w, eps).backward(dy)
    return x.grad, w.grad


def raises_at_n3(x, w, dy, rstd, eps):
    if x.shape[1] == 3:
        raise RuntimeError("unsupported hidden size 3")
    return rms_backward(x, w, dy, rstd, eps)


def segfaults_at_n7(x, w, dy, rstd, eps):
    if x.shape[1] == 7:
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return rms_backward(x, w, dy, rstd, eps)


def leaves_column_0_unwritten(x, w, dy, rstd, eps):
    dx, dw = rms_backward(x, w, dy, rstd, eps)
    out = torch.empty_like(dx)  # the library's own output buffer; column 0 is never written
    out[:, 1:] = dx[:, 1:]
    return out, dw


for name, backward in [("py_rms_raises_at_n3", raises_at_n3), ("py_rms_segfaults_at_n7", segfaults_at_n7),
                       ("py_rms_column_0_unwritten", leaves_column_0_unwritten)]:
    ulpcheck.rmsnorm(name, forward=rms_forward, backward=backward, backend="host", dtypes=("fp32",))
# The same on the GPU, where dx comes from torch's caching allocator (which
# the worker hands all-ones memory first, though here it reuses the block of
# the call's own freed temporary): caught as wrong values.
ulpcheck.rmsnorm("py_cuda_rms_column_0_unwritten", forward=rms_forward, backward=leaves_column_0_unwritten,
                 backend="cuda", dtypes=("fp32",))


def compiled_for_5_and_33(x, w, dy, rstd, eps):
    # A kernel compiled for two hidden sizes (quack compiles per N): any other is an error.
    if x.shape[1] not in (5, 33):
        raise RuntimeError(f"not compiled for N = {x.shape[1]}")
    return rms_backward(x, w, dy, rstd, eps)


ulpcheck.rmsnorm("py_rms_compiled_for_5_and_33", forward=rms_forward, backward=compiled_for_5_and_33, backend="host",
                 dtypes=("fp32",), cols=(5, 33))


def _compiling_backward():
    compiled = set()

    def backward(x, w, dy, rstd, eps):
        # A JIT library: the first call of each hidden size "compiles" for 3 s.
        if x.shape[1] not in compiled:
            compiled.add(x.shape[1])
            time.sleep(3)
        return rms_backward(x, w, dy, rstd, eps)

    return backward


for name, declared in [("py_rms_compiles_3s_per_n", True), ("py_rms_compiles_3s_per_n_undeclared", False)]:
    ulpcheck.rmsnorm(name, forward=rms_forward, backward=_compiling_backward(), backend="host", dtypes=("fp32",),
                     compiles_per_shape=declared)
