"""Two correct host RMSNorms whose results depend on what ran before them in
their Python worker process: the first marks the process, the second is
wrong (y doubled) in a marked process. They stand for a mutant that damages
its process (an out-of-bounds write) and a correct variant run after it in
the same process: the kill matrix gives each row a fresh worker, so the
second raises no false alarm there, while `run` (one worker for both) shows
the damage."""

import torch

import ulpcheck

marked = False


def rms_forward(x, w, eps):
    xf = x.float()  # as torch.nn.functional.rms_norm computes it (Debian's torch 1.13 has none)
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rms_backward(x, w, dy, rstd, eps):
    inputs = (x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_())
    return torch.autograd.grad(rms_forward(*inputs, eps), inputs, dy)


def marking_forward(x, w, eps):
    global marked
    marked = True
    return rms_forward(x, w, eps)


def forward_wrong_in_a_marked_process(x, w, eps):
    y = rms_forward(x, w, eps)
    return y * 2 if marked else y


ulpcheck.rmsnorm("py_rms_marks_its_process", forward=marking_forward, backward=rms_backward, backend="host",
                 dtypes=("fp32",))
ulpcheck.rmsnorm("py_rms_wrong_in_a_marked_process", forward=forward_wrong_in_a_marked_process,
                 backward=rms_backward, backend="host", dtypes=("fp32",))
