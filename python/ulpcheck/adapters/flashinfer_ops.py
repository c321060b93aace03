"""FlashInfer's fused add + RMSNorm and RMSNorm, both of its backends, called directly.

    ulpcheck run --python python/ulpcheck/adapters/flashinfer_ops.py --op fused_add_rmsnorm
    ulpcheck run --python python/ulpcheck/adapters/flashinfer_ops.py --op rmsnorm
    ulpcheck run --python python/ulpcheck/adapters/flashinfer_ops.py --op rmsnorm_quant
    ulpcheck run --python python/ulpcheck/adapters/flashinfer_ops.py --op fused_add_rmsnorm_quant

flashinfer.fused_add_rmsnorm(input, residual, weight, eps) (flashinfer-python
0.7.2.post1, norm/__init__.py:769-805) picks its backend at run time: the
CuTe DSL kernel (norm/kernels/fused_add_rmsnorm.py, fused_add_rmsnorm_cute)
unless FLASHINFER_USE_CUDA_NORM=1 is set at import or the DSL cannot target
the GPU, then the CUDA JIT module (get_norm_module().fused_add_rmsnorm, built
with nvcc on first use). Each variant here calls one backend's function
itself, so which one ran is its name: flashinfer_fused_add_rmsnorm_cute and
flashinfer_fused_add_rmsnorm_cuda (and the Gemma forms, weight_bias=1.0:
gemma_fused_add_rmsnorm's y = x-hat (1 + w)).

The spec (../shared/research/fused-family-specs.md §2, read from both
backends' code): residual <- RN_T(x + residual), the sum in fp32; input <-
RN_T(rmsnorm of the unrounded fp32 sum) (x-hat w in fp32, one rounding): the
spec's sum="fp32". Weights in x's dtype only; no backward (an inference
kernel). It writes its results into its inputs, which are ulpcheck's
buffers: each call works on copies laid out as they are (the row stride
kept, so the CuTe backend's strided kernel is reached for ld > N, its compact
one for ld = N, norm/kernels/fused_add_rmsnorm.py:1051-1055).

Rows must be 16-byte aligned (aligned_rows): the CuTe kernel refuses a row
stride that is not a multiple of its vector (ValueError "Invalid
mX.strides[0] ... expected to be divisible by 8"), though its docstring
says it supports non-contiguous tensors; the CUDA kernel does not check and
faults (cudaErrorMisalignedAddress, a sticky error) on such a stride. Both
were found by ulpcheck on the H200 before the precondition was declared
(docs/external-kernels.md). The CUDA backend is built with fast math: it
flushes subnormal sums, so residual_out is 0 where RN(x + residual) is
subnormal; its accuracy fails on such cases, recorded there too.

flashinfer.rmsnorm(input, weight, eps, out) and gemma_rmsnorm
(norm/__init__.py:642-698, 963-1019) pick their backend the same way:
rmsnorm_cute (norm/kernels/rmsnorm.py:1320-1360; x in fp32, rstd =
rsqrt(mean(x^2) + eps, fastmath) at :389, y = x rstd (w + weight_bias) in
fp32 and one rounding to T at :406-408) or the CUDA module's rmsnorm
(csrc/norm.cu, input and output row strides passed through; fp16/bf16 only).
The plain spec, weights in x's dtype; no backward and rstd not saved (an
inference kernel): flashinfer_rmsnorm_{cute,cuda}{,_gemma} declare
backward=None and are judged on y. The CUDA backend's fast math flushes
subnormal x to zero there too (y = 0 for a row of bf16 subnormals, where
x / sqrt(eps) is normal; docs/external-kernels.md).
"""

import importlib

import torch

import ulpcheck

fi_norm = importlib.import_module("flashinfer.norm")


def _empty_with_layout(t):
    """An M x N tensor with the M x N view t's row stride (empty_like would make it contiguous)."""
    rows, cols = t.shape
    return torch.empty((rows, t.stride(0)), dtype=t.dtype, device=t.device)[:, :cols]


def _copy_with_layout(t):
    """A copy of t with its row stride (clone() would make it contiguous)."""
    out = _empty_with_layout(t)
    out.copy_(t)
    return out


def _cute(x, residual, w, eps, weight_bias):
    fi_norm.fused_add_rmsnorm_cute(x, residual, w, eps, weight_bias=weight_bias, enable_pdl=False)


def _cuda(x, residual, w, eps, weight_bias):
    module = fi_norm.get_norm_module()
    if weight_bias == 0.0:
        module.fused_add_rmsnorm(x, residual, w, eps, False)
    else:
        module.gemma_fused_add_rmsnorm(x, residual, w, eps, False)


def _variant(backend, weight_bias):
    def forward(x, residual, w, eps):
        y, residual_out = _copy_with_layout(x), _copy_with_layout(residual)
        backend(y, residual_out, w, eps, weight_bias)  # in place: y <- the norm, residual_out <- the sum
        return y, residual_out

    return forward


for backend, which in ((_cute, "cute"), (_cuda, "cuda")):
    for weight_bias, suffix, what in ((0.0, "", ""), (1.0, "_gemma", ", weight_bias=1.0 (Gemma's 1 + w)")):
        ulpcheck.fused_add_rmsnorm(
            f"flashinfer_fused_add_rmsnorm_{which}{suffix}", forward=_variant(backend, weight_bias), backend="cuda",
            dtypes=("fp16", "bf16"), sum="fp32", weight_offset=weight_bias, compiles_per_shape=True, aligned_rows=True,
            libraries=("torch", "flashinfer"),
            description=f"FlashInfer's fused_add_rmsnorm, its {'CuTe DSL' if which == 'cute' else 'CUDA JIT'} "
                        f"backend{what}: the norm of the fp32 sum")


def _rmsnorm_variant(which, weight_bias):
    def forward(x, w, eps):
        out = _empty_with_layout(x)  # the input's row stride: the CuTe backend's strided kernel for ld > N
        if which == "cute":
            fi_norm.rmsnorm_cute(x, w, out, eps, weight_bias=weight_bias, enable_pdl=False)
        elif weight_bias == 0.0:
            fi_norm.get_norm_module().rmsnorm(out, x, w, eps, False)
        else:
            fi_norm.get_norm_module().gemma_rmsnorm(out, x, w, eps, False)
        return out

    return forward


for which in ("cute", "cuda"):
    for weight_bias, suffix, what in ((0.0, "", ""), (1.0, "_gemma", ", weight_bias=1.0 (gemma_rmsnorm: 1 + w)")):
        ulpcheck.rmsnorm(
            f"flashinfer_rmsnorm_{which}{suffix}", forward=_rmsnorm_variant(which, weight_bias), backward=None,
            backend="cuda", dtypes=("fp16", "bf16"), weight_offset=weight_bias, compiles_per_shape=True,
            aligned_rows=True, libraries=("torch", "flashinfer"),
            description=f"FlashInfer's rmsnorm, its {'CuTe DSL' if which == 'cute' else 'CUDA JIT'} backend{what}: "
                        "forward only")


def _rmsnorm_quant_variant(which):
    def forward(x, w, scale, eps):
        # fp8 out with the input's row stride; scale: ulpcheck's 1-element fp32 tensor, as FlashInfer takes it.
        out = torch.empty((x.shape[0], x.stride(0)), dtype=torch.float8_e4m3fn, device=x.device)[:, :x.shape[1]]
        if which == "cute":
            fi_norm.rmsnorm_quant_cute(out, x, w, scale, eps, weight_bias=0.0, enable_pdl=False)
        else:
            fi_norm.get_norm_module().rmsnorm_quant(out, x, w, scale, eps, False)
        return out

    return forward


# flashinfer.rmsnorm_quant(out, input, weight, scale, eps): y = x rstd w in
# fp32, not rounded to x's dtype, times 1/scale (rcp.approx in the CuTe
# kernel, fast-math division in the CUDA one: inverse="approx"), converted
# with cvt .satfinite (the CUDA kernel clamps to +-448 first): the spec's
# defaults otherwise. Its own test compares with rtol=1, atol=1.
for which in ("cute", "cuda"):
    if which == "cute" and not hasattr(fi_norm, "rmsnorm_quant_cute"):
        continue
    ulpcheck.rmsnorm_quant(
        f"flashinfer_rmsnorm_quant_{which}", forward=_rmsnorm_quant_variant(which), backend="cuda",
        dtypes=("fp16", "bf16"), inverse="approx", compiles_per_shape=True, aligned_rows=True,
        libraries=("torch", "flashinfer"),
        description=f"FlashInfer's rmsnorm_quant, its {'CuTe DSL' if which == 'cute' else 'CUDA JIT'} backend: "
                    "E4M3 with a static scale, satfinite")


def _fused_add_rmsnorm_quant_variant(which):
    def forward(x, residual, w, scale, eps):
        # out: fp8 with x's row stride; residual_out: written into a copy of the residual (x is not written).
        out = torch.empty((x.shape[0], x.stride(0)), dtype=torch.float8_e4m3fn, device=x.device)[:, :x.shape[1]]
        residual_out = _copy_with_layout(residual)
        if which == "cute":
            fi_norm.fused_add_rmsnorm_quant_cute(out, x, residual_out, w, scale, eps, weight_bias=0.0,
                                                 enable_pdl=False)
        else:
            fi_norm.get_norm_module().fused_add_rmsnorm_quant(out, x, residual_out, w, scale, eps, False)
        return out, residual_out

    return forward


# flashinfer.fused_add_rmsnorm_quant(out, input, residual, weight, scale, eps)
# (norm/__init__.py:819-876): residual <- RN_T(x + residual), out <- the
# rmsnorm_quant chain on the norm of the unrounded fp32 sum (sum="fp32"),
# x-hat w in fp32 times 1/scale (inverse="approx"), satfinite; input is not
# written (fused-family-specs.md §2). Its test compares with rtol=1, atol=1.
for which in ("cute", "cuda"):
    if which == "cute" and not hasattr(fi_norm, "fused_add_rmsnorm_quant_cute"):
        continue
    ulpcheck.fused_add_rmsnorm_quant(
        f"flashinfer_fused_add_rmsnorm_quant_{which}", forward=_fused_add_rmsnorm_quant_variant(which),
        backend="cuda", dtypes=("fp16", "bf16"), sum="fp32", inverse="approx", compiles_per_shape=True,
        aligned_rows=True, libraries=("torch", "flashinfer"),
        description=f"FlashInfer's fused_add_rmsnorm_quant, its {'CuTe DSL' if which == 'cute' else 'CUDA JIT'} "
                    "backend: the norm of the fp32 sum, E4M3 with a static scale, satfinite")
