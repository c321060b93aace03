"""PyTorch's own norms (ATen), forward and backward through autograd.

    ulpcheck run --python python/ulpcheck/adapters/torch_ops.py --kernel torch_rms_norm

The spec they implement is ulpcheck's plain one: fp32 statistics and math,
one rounding of each output to the input dtype (torch.nn.functional.rms_norm
with matching dtypes runs the fused kernel; LayerNorm likewise), dW/dgamma/
dbeta in the weight's dtype. RMSNorm does not expose its saved statistics,
so its rstd is not judged; the CUDA LayerNorm is called as autograd calls it,
torch.native_layer_norm (y, mean, rstd) then aten.native_layer_norm_backward
on those statistics, so its mean and rstd are judged and it declares how it
uses them (uses_saved_statistics). Contracts are declared as the documentation
promises; where ulpcheck finds a counterexample, docs/external-kernels.md
records it (PyTorch's vectorised RMSNorm path depends on pointer alignment,
so a row's bits may depend on where it sits in the batch).
"""

import torch
import torch.nn.functional as F

import ulpcheck


def _rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):  # torch >= 2.4: the ATen kernel
        return F.rms_norm(x, x.shape[-1:], w, eps)
    # Older torch: the composite of its own ops, fp32 math, one rounding.
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rms_norm_forward(x, w, eps):
    return _rms_norm(x, w, eps)


def rms_norm_backward(x, w, dy, rstd, eps):
    x = x.detach().clone().requires_grad_()
    w = w.detach().clone().requires_grad_()
    _rms_norm(x, w, eps).backward(dy)
    return x.grad, w.grad


def layer_norm_forward(x, gamma, beta, eps):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def layer_norm_backward(x, gamma, dy, mean, rstd, eps):
    # gamma is None under affine=none (elementwise_affine=False); dbeta is not
    # stored under affine=nobias, so a zero beta stands in for it either way.
    x = x.detach().clone().requires_grad_()
    gamma = gamma.detach().clone().requires_grad_() if gamma is not None else None
    beta = torch.zeros_like(gamma, requires_grad=True) if gamma is not None else None
    F.layer_norm(x, x.shape[-1:], gamma, beta, eps).backward(dy)
    return x.grad, (gamma.grad if gamma is not None else None), (beta.grad if beta is not None else None)


def native_layer_norm_forward(x, gamma, beta, eps):
    return torch.native_layer_norm(x, x.shape[-1:], gamma, beta, eps)


def native_layer_norm_backward(x, gamma, dy, mean, rstd, eps):
    # What F.layer_norm's autograd runs, on the statistics the forward saved.
    # A zero beta stands in for an absent one (dbeta is then not stored).
    beta = torch.zeros_like(gamma) if gamma is not None else None
    mask = [True, gamma is not None, beta is not None]
    return torch.ops.aten.native_layer_norm_backward(dy, x, x.shape[-1:], mean, rstd, gamma, beta, mask)


_rms = "torch.nn.functional.rms_norm" if hasattr(F, "rms_norm") else "a composite of torch ops (this torch has no F.rms_norm)"

# An fp32 weight beside 16-bit x takes F.rms_norm's composite path (upcast,
# x rstd w in fp32, one rounding to x's dtype): the plain spec with
# wdtype=fp32, w.grad in fp32.
ulpcheck.rmsnorm("torch_rms_norm", forward=rms_norm_forward, backward=rms_norm_backward, backend="cuda",
                 fp32_weights=True,
                 description=f"PyTorch's RMSNorm on the GPU: {_rms}, backward through autograd")


def _layer_norm_takes_fp32_gamma(device):
    # fp32 gamma and beta beside bf16 x: torch 2.11 takes them on the CPU (its
    # mixed-type path: fp32 math, y in x's dtype, dgamma and dbeta in fp32) and
    # refuses them on CUDA, as torch 1.13 does on the CPU ("expected scalar
    # type BFloat16 but found Float"). Ask this torch, on this device.
    if device == "cuda" and not torch.cuda.is_available():
        return False
    try:
        F.layer_norm(torch.zeros(1, 2, dtype=torch.bfloat16, device=device), (2,),
                     torch.ones(2, device=device), torch.zeros(2, device=device))
        return True
    except RuntimeError:
        return False


# The shape of PyTorch's CUDA LayerNorm row reductions (aten/src/ATen/native/
# cuda/layer_norm_kernel.cu; num_threads() = 4 warps, thread_constants.h), in
# roundings along a path (an add of an exact zero, a lane past the last warp,
# does not round): the vectorized forward's compute_stats runs 128 threads,
# each a Welford chain of 4 ceil(N / 512) < N / 128 + 4 elements, then 5
# shuffle levels and 2 across the 4 warps; RowwiseMomentsCUDAKernel (rows that
# do not vectorize) 512 threads, chains of ceil(N / 512), then BlockReduce's
# warp levels (5 + 4); the backward's row sums (compute_gI and its vectorized
# twin) 128 threads, chains of 4 per step (< N / 128 + 4) and a tail of at most
# 3, then BlockReduceSum (5 + 2). ceil(N / 128) + 14 covers each.
# Its statistics: mean and rstd = rsqrt(sigma2 + eps) are stored in fp32 as
# computed, and y = gamma (rstd (x - mean)) + beta is formed from those same
# values (vectorized_layer_norm_kernel_impl; LayerNormForwardCUDAKernel reads
# them back from the saved tensors); the backward's x-hat is (x - mean) rstd
# of the statistics it is given (layer_norm_grad_input_kernel and its
# vectorized twin): uses_saved_statistics. Its variance is Welford's, in that
# shape (running_means): chains of Welford's update, 128 lanes reading 4
# elements at a time (4 ceil(N / 512); RowwiseMoments' ceil(N / 512) is
# shorter), then 7 levels of cuWelfordCombine (RowwiseMoments: 9 of WelfordOps'
# combine). Rows whose length 4 does not divide never take the vectorized
# path (it needs N % 4 == 0 and aligned pointers): RowwiseMoments merges them
# in the update form, a.mean + delta * (b.nf / new_count), an empty side
# returned as is (running_merges); cuWelfordCombine's weighted average does not.
_TORCH_LAYER_NORM_ROW_DEPTH = (128, 14)
_TORCH_LAYER_NORM_RUNNING_MEANS = (128, 4, 9)
_TORCH_LAYER_NORM_RUNNING_MERGES = "update_unless_vectorized"
ulpcheck.layernorm("torch_layer_norm", forward=native_layer_norm_forward, backward=native_layer_norm_backward,
                   backend="cuda", fp32_weights=_layer_norm_takes_fp32_gamma("cuda"), affine_variants=True,
                   row_depth=_TORCH_LAYER_NORM_ROW_DEPTH, running_means=_TORCH_LAYER_NORM_RUNNING_MEANS,
                   running_merges=_TORCH_LAYER_NORM_RUNNING_MERGES,
                   saves_stats=True, uses_saved_statistics=True,
                   description="PyTorch's LayerNorm on the GPU: torch.native_layer_norm and "
                               "aten.native_layer_norm_backward on its saved mean and rstd, as autograd runs them")

# The same on the CPU, where CI can run them (torch before 2.1 has no fp16 LayerNorm on the CPU).
_version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
_cpu_dtypes = ("fp32", "bf16") if _version < (2, 1) else ulpcheck.DTYPES
ulpcheck.rmsnorm("torch_rms_norm_cpu", forward=rms_norm_forward, backward=rms_norm_backward, backend="host",
                 dtypes=_cpu_dtypes, fp32_weights=True, description=f"PyTorch's RMSNorm on the CPU: {_rms}")
ulpcheck.layernorm("torch_layer_norm_cpu", forward=layer_norm_forward, backward=layer_norm_backward, backend="host",
                   dtypes=_cpu_dtypes, fp32_weights=_layer_norm_takes_fp32_gamma("cpu"), affine_variants=True,
                   description="PyTorch's LayerNorm on the CPU: torch.nn.functional.layer_norm")


def fused_add_rms_norm_forward(x, residual, w, eps):
    # The unfused pipeline: residual_out = x + residual in the residual's dtype
    # (fp32 math, one rounding), then F.rms_norm of it (fp32 math, y in x's dtype).
    residual_out = x.to(residual.dtype) + residual
    return _rms_norm(residual_out, w, eps).to(x.dtype), residual_out


def fused_add_rms_norm_fp32_sum_forward(x, residual, w, eps):
    # FlashInfer's and quack's order: the norm of the fp32 sum, residual_out its rounding.
    h = x.float() + residual.float()
    return _rms_norm(h, w, eps).to(x.dtype), h.to(residual.dtype)


def _fused_add_rms_norm_backward(normed, saved, w, dy, dresidual_out, eps, x_dtype):
    # The spec in fp32 torch ops: rstd of what the forward normalised, x-hat of
    # the residual_out it saved, g = dresidual_out + dnorm(dy) summed once in
    # fp32 (autograd through the unfused 16-bit pipeline would round dnorm to
    # the residual's dtype before adding: a second rounding the fused kernels
    # do not make). dw summed in fp32, one rounding to w's dtype.
    rstd = torch.rsqrt(normed.float().pow(2).mean(-1, keepdim=True) + eps)
    xhat = saved.float() * rstd
    wdy = dy.float() * w.float()
    g = (wdy - xhat * (xhat * wdy).mean(-1, keepdim=True)) * rstd + dresidual_out.float()
    return g.to(x_dtype), g.to(dresidual_out.dtype), (dy.float() * xhat).sum(0).to(w.dtype)


def fused_add_rms_norm_backward(x, residual, w, dy, dresidual_out, eps):
    residual_out = x.to(residual.dtype) + residual
    return _fused_add_rms_norm_backward(residual_out, residual_out, w, dy, dresidual_out, eps, x.dtype)


def fused_add_rms_norm_llama_forward(x, residual, w, eps):
    # HF LlamaRMSNorm after the add: x-hat in fp32, rounded to x's dtype, times w.
    residual_out = x + residual
    h = residual_out.float()
    q = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (q.float() * w.float()).to(x.dtype), residual_out


def fused_add_rms_norm_llama_backward(x, residual, w, dy, dresidual_out, eps):
    # Liger's llama backward in fp32 torch ops: dx of the unrounded x-hat with
    # (dy w) in fp32; dw's terms dy round(x-hat) rounded to x's dtype (a
    # product of two x-dtype tensors), summed in fp32.
    residual_out = x + residual
    dx, dresidual, _ = _fused_add_rms_norm_backward(residual_out, residual_out, w, dy, dresidual_out, eps, x.dtype)
    h = residual_out.float()
    q = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return dx, dresidual, (dy * q).float().sum(0).to(w.dtype)


def fused_add_rms_norm_fp32_sum_backward(x, residual, w, dy, dresidual_out, eps):
    # quack's: rstd of the fp32 sum, x-hat of the rounded residual_out it saves.
    h = x.float() + residual.float()
    return _fused_add_rms_norm_backward(h, h.to(residual.dtype), w, dy, dresidual_out, eps, x.dtype)


# Fused residual add + RMSNorm as PyTorch's own ops compose it, on the CPU:
# the unfused pipeline (sum="rounded"), and FlashInfer's and quack's spec
# (sum="fp32"), each with fp32 weights and (the first) an fp32 residual too;
# the backward of each in fp32 torch ops.
ulpcheck.fused_add_rmsnorm("torch_fused_add_rms_norm_cpu", forward=fused_add_rms_norm_forward,
                           backward=fused_add_rms_norm_backward, backend="host",
                           dtypes=_cpu_dtypes, fp32_weights=True, fp32_residual=True,
                           description=f"x + residual, then {_rms}, on the CPU; the backward in fp32 torch ops")
ulpcheck.fused_add_rmsnorm("torch_fused_add_rms_norm_llama_cpu", forward=fused_add_rms_norm_llama_forward,
                           backward=fused_add_rms_norm_llama_backward, backend="host", dtypes=_cpu_dtypes,
                           rounding="llama",
                           description="x + residual, then HF LlamaRMSNorm's order (x-hat rounded before w), on "
                                       "the CPU; the backward in fp32 torch ops as Liger's llama mode")
ulpcheck.fused_add_rmsnorm("torch_fused_add_rms_norm_fp32_sum_cpu", forward=fused_add_rms_norm_fp32_sum_forward,
                           backward=fused_add_rms_norm_fp32_sum_backward,
                           backend="host", dtypes=_cpu_dtypes, fp32_weights=True, sum="fp32",
                           description=f"the fp32 sum x + residual, then {_rms} of it, on the CPU; the backward "
                                       "in fp32 torch ops (quack's: rstd of the fp32 sum)")


def allreduce_rms_norm_forward(x, residual, w, eps, ranks):
    # A tensor-parallel stack's epilogue as vLLM's and Megatron's run it
    # unfused: dist.all_reduce of the partials in x's dtype (NCCL: with two
    # ranks one correctly rounded add; with more it rounds after every hop,
    # outside the spec, hence ranks=(1, 2)), then the add and the norm.
    import torch.distributed as dist
    s = torch.empty_like(x, memory_format=torch.contiguous_format).copy_(x)  # all_reduce works in place: a copy
    dist.all_reduce(s, group=ranks.group)
    return fused_add_rms_norm_forward(s, residual, w, eps)  # s + residual, then the norm: the pipeline above


def allreduce_fp32_rms_norm_forward(x, residual, w, eps, ranks):
    # The spec for any rank count: the partials widened to fp32 and summed in
    # the backend's own order (NCCL's ring or tree, gloo's), rounded to x's
    # dtype once.
    import torch.distributed as dist
    s = torch.empty(x.shape, dtype=torch.float32, device=x.device).copy_(x)  # never x itself: all_reduce is in place
    dist.all_reduce(s, group=ranks.group)
    return fused_add_rms_norm_forward(s.to(x.dtype), residual, w, eps)


# The torch.distributed reference of the multi-rank door: a user's unfused
# pipeline (all_reduce, add, F.rms_norm), one process per rank. Not batch
# invariant: F.rms_norm's CUDA kernel takes its vectorised path by the row's
# alignment (y differs by an ulp with the row's place in the batch, seen on
# the H200 at fp16 and bf16), and beyond two ranks NCCL's order depends on
# the buffer's size.
ulpcheck.allreduce_rmsnorm("torch_allreduce_rms_norm", forward=allreduce_rms_norm_forward, backend="cuda",
                           ranks=(1, 2), batch_invariant=False, fp32_weights=True, fp32_residual=True,
                           description=f"torch.distributed.all_reduce (NCCL, x's dtype), x + residual, then {_rms}")
ulpcheck.allreduce_rmsnorm("torch_allreduce_fp32_rms_norm", forward=allreduce_fp32_rms_norm_forward, backend="cuda",
                           batch_invariant=False, fp32_weights=True, fp32_residual=True,
                           description=f"torch.distributed.all_reduce (NCCL) of the partials in fp32, rounded to x's "
                                       f"dtype, x + residual, then {_rms}")
# On the CPU (gloo: one process per virtual rank), where CI runs the door.
# Debian's torch 1.13 gloo has no bf16 sum: the partials are widened.
ulpcheck.allreduce_rmsnorm("torch_allreduce_rms_norm_cpu", forward=allreduce_fp32_rms_norm_forward, backend="host",
                           dtypes=_cpu_dtypes, batch_invariant=False, fp32_weights=True, fp32_residual=True,
                           description=f"torch.distributed.all_reduce (gloo) of the partials in fp32, rounded to "
                                       f"x's dtype, x + residual, then {_rms}, on the CPU")


# RMSNorm quantized to FP8 (rmsnorm_quant) as a user's reference writes it:
# F.rms_norm of x in fp32, then (y / scale).to(torch.float8_e4m3fn), torch's
# cast rounding to nearest even and overflowing to NaN (overflow="nonfinite"),
# the scale applied by division (inverse="divide"). Per token, the scale is
# the row's amax / 448 clamped at 1 / (512 * 448), vLLM's and FlashInfer's
# floor. torch 2.1 and later (float8 dtypes).
_FP8_MAX = 448.0


def rms_norm_static_fp8_forward(x, w, scale, eps):
    y = _rms_norm(x.float(), w.float(), eps)
    return (y / scale).to(torch.float8_e4m3fn)


def rms_norm_token_fp8_forward(x, w, scale, eps):
    y = _rms_norm(x.float(), w.float(), eps)
    s = torch.clamp(y.abs().amax(dim=-1, keepdim=True) / _FP8_MAX, min=1.0 / (512 * _FP8_MAX))
    return (y / s).to(torch.float8_e4m3fn), s


# Fused add + RMSNorm quantized to FP8 (fused_add_rmsnorm_quant), the same
# way: FlashInfer's order (the norm of the fp32 sum, residual_out its
# rounding), then the static or per-row scale as above.
def fused_add_rms_norm_static_fp8_forward(x, residual, w, scale, eps):
    h = x.float() + residual.float()
    return (_rms_norm(h, w.float(), eps) / scale).to(torch.float8_e4m3fn), h.to(residual.dtype)


def fused_add_rms_norm_token_fp8_forward(x, residual, w, scale, eps):
    h = x.float() + residual.float()
    y_q, s = rms_norm_token_fp8_forward(h, w, scale, eps)
    return y_q, s, h.to(residual.dtype)


if hasattr(torch, "float8_e4m3fn"):
    for _backend, _suffix, _where in (("cuda", "", "the GPU"), ("host", "_cpu", "the CPU")):
        ulpcheck.fused_add_rmsnorm_quant(
            f"torch_fused_add_rms_norm_static_fp8{_suffix}", forward=fused_add_rms_norm_static_fp8_forward,
            backend=_backend, fp32_weights=True, sum="fp32", overflow="nonfinite", inverse="divide",
            description=f"x + residual in fp32, {_rms} of it on {_where}, then (y / scale).to(float8_e4m3fn)")
        ulpcheck.fused_add_rmsnorm_quant(
            f"torch_fused_add_rms_norm_token_fp8{_suffix}", forward=fused_add_rms_norm_token_fp8_forward,
            backend=_backend, fp32_weights=True, sum="fp32", quant="token", overflow="nonfinite", inverse="divide",
            description=f"x + residual in fp32, {_rms} of it on {_where}, a per-row scale amax / 448 (at least "
                        "1 / (512 * 448)), then (y / scale).to(float8_e4m3fn)")
        ulpcheck.rmsnorm_quant(f"torch_rms_norm_static_fp8{_suffix}", forward=rms_norm_static_fp8_forward,
                               backend=_backend, fp32_weights=True, overflow="nonfinite", inverse="divide",
                               description=f"{_rms} in fp32 on {_where}, then (y / scale).to(float8_e4m3fn)")
        ulpcheck.rmsnorm_quant(f"torch_rms_norm_token_fp8{_suffix}", forward=rms_norm_token_fp8_forward,
                               backend=_backend, fp32_weights=True, quant="token", overflow="nonfinite",
                               inverse="divide",
                               description=f"{_rms} in fp32 on {_where}, a per-row scale amax / 448 (at least "
                                           "1 / (512 * 448)), then (y / scale).to(float8_e4m3fn)")
