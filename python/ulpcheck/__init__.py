"""Put Python kernels (PyTorch, Triton, CuTe DSL, ...) under ulpcheck.

A kernels file registers variants; `ulpcheck run --python kernels.py` runs
every property on them, in a worker process (python -m ulpcheck.worker):

    import ulpcheck
    import torch.nn.functional as F

    def forward(x, gamma, beta, eps):                 # x: M x N (a strided view), gamma, beta: N
        return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)

    def backward(x, gamma, dy, mean, rstd, eps):      # mean, rstd: None unless the variant saves them
        x, gamma = x.detach().requires_grad_(), gamma.detach().requires_grad_()
        beta = torch.zeros_like(gamma, requires_grad=True)
        F.layer_norm(x, x.shape[-1:], gamma, beta, eps).backward(dy)
        return x.grad, gamma.grad, beta.grad

    ulpcheck.layernorm("my_layer_norm", forward=forward, backward=backward, backend="cuda")

Calls:
  rmsnorm:   forward(x, w, eps) -> y, or (y, rstd) with saves_stats=True;
             backward(x, w, dy, rstd, eps) -> (dx, dw)
             with bias_variants=True, cases with a bias (y = xhat w + b) call
             forward(x, w, eps, bias=b) and backward(..., eps, has_bias=True) -> (dx, dw, db)
  layernorm: forward(x, gamma, beta, eps) -> y, or (y, mean, rstd) with saves_stats=True;
             backward(x, gamma, dy, mean, rstd, eps) -> (dx, dgamma, dbeta)
Inputs are torch tensors over ulpcheck's own buffers (x has row stride ld);
results are copied into ulpcheck's poisoned output buffers, so they must
have the output's shape and dtype (statistics: fp32, one per row, or x's
dtype with stats="activation"). A variant declares its contracts honestly:
ulpcheck holds it to them.

Its spec: `rounding`, `weight_offset` and `stats` name the one spec the
variant implements (Liger's llama mode: rounding="llama"; a Gemma RMSNorm:
weight_offset=1.0; a LayerNorm saving Mean and RSTD in x's dtype:
stats="activation"), and ulpcheck generates that spec only; fp32_weights=True
adds fp32 weights beside 16-bit activations to the variant's own dtype, and
affine_variants=True (LayerNorm) adds cases without beta and without either
parameter: the forward is then given None for them, the backward None for
gamma when there is none, and the gradients of absent parameters it returns
are not stored.
"""

import dataclasses
from typing import Callable, List, Optional

from . import ops

DTYPES = ("fp32", "fp16", "bf16")


@dataclasses.dataclass
class Variant:
    op: str
    name: str
    forward: Callable
    backward: Callable
    backend: str = "cuda"                 # "cuda" or "host" (CPU tensors)
    dtypes: tuple = DTYPES
    deterministic: bool = True
    batch_invariant: bool = True
    accumulation: str = "fp32"
    row_depth: int = 0                    # 0: unknown (ulpcheck assumes the worst any order does)
    col_depth: int = 0
    contiguous_rows: bool = False         # needs ld == N
    aligned_rows: bool = False            # needs 16-byte aligned rows
    max_cols: int = 0
    cols: tuple = ()                      # the hidden sizes to test (a kernel that compiles per N); () any
    saves_stats: bool = False             # forward returns rstd (and mean) and backward consumes them
    two_pass_statistics: bool = False     # LayerNorm: mean, then sum (x - mean)^2 (not running means, as Welford)
    compiles_per_shape: bool = False      # JIT-compiles per (dtype, N, M bucket): each first call gets 900 s, not --case-timeout
    fp32_weights: bool = False            # takes w (gamma) in fp32 beside 16-bit x, returning dw in fp32 (the spec's wdtype=fp32)
    # The one spec it implements beyond those (ulpcheck's NormSpec; a variant is tested on it alone):
    rounding: str = "plain"               # RMSNorm: "plain" (one rounding) or "llama" (x rstd rounded to x's dtype first)
    weight_offset: float = 0.0            # RMSNorm: y = x rstd (offset + w), offset + w in fp32 (Gemma's 1.0)
    stats: str = "fp32"                   # the saved mean/rstd: "fp32", or "activation" (rounded to x's dtype)
    affine_variants: bool = False         # LayerNorm: also without beta (beta None, dbeta not stored) and without
                                          # either (gamma None too): torch.nn.LayerNorm(bias=False / elementwise_affine=False)
    bias_variants: bool = False           # RMSNorm: also with a bias b (w's dtype): y = x rstd (offset + w) + b, db = sum dy
                                          # (quack's rmsnorm(bias=)); forward gets bias=b, backward has_bias=True
    description: str = ""
    libraries: tuple = ("torch",)         # modules whose versions are the variant's provenance

    def describe(self) -> dict:
        d = dataclasses.asdict(self)
        del d["forward"], d["backward"]
        d["dtypes"] = list(self.dtypes)
        d["libraries"] = list(self.libraries)
        d["cols"] = [int(n) for n in self.cols]
        return d


_registry: List[Variant] = []


# The spec options some ops have (ops/<op>.py, Op.spec_options), each with the
# value that leaves it off; the others (fp32_weights, stats) every op has.
_SPEC_OPTIONS = {"rounding": "plain", "weight_offset": 0.0, "affine_variants": False, "bias_variants": False}


def _register(op: str, name: str, **kw) -> Variant:
    if op not in ops.OPS:
        raise ValueError(f"{name}: op {op!r} is not one of {', '.join(ops.OPS)}")
    v = Variant(op=op, name=name, **kw)
    if v.backend not in ("cuda", "host"):
        raise ValueError(f"{name}: backend must be 'cuda' or 'host', not {v.backend!r}")
    if not v.dtypes or any(t not in DTYPES for t in v.dtypes):
        raise ValueError(f"{name}: dtypes must be among {DTYPES}, not {v.dtypes!r}")
    if v.rounding not in ("plain", "llama"):
        raise ValueError(f"{name}: rounding must be 'plain' or 'llama', not {v.rounding!r}")
    if v.stats not in ("fp32", "activation"):
        raise ValueError(f"{name}: stats must be 'fp32' or 'activation', not {v.stats!r}")
    own = ops.OPS[op].spec_options
    for option, off in _SPEC_OPTIONS.items():
        if getattr(v, option) != off and option not in own:
            raise ValueError(f"{name}: {option} is not among {op}'s specs ({', '.join(own) or 'none'})")
    if v.bias_variants and v.rounding == "llama":
        raise ValueError(f"{name}: a bias with rounding='llama' is not modelled")
    if v.stats != "fp32" and not v.saves_stats:
        raise ValueError(f"{name}: stats={v.stats!r} names the dtype of saved statistics; it saves none (saves_stats)")
    if v.stats != "fp32" and v.rounding == "llama":
        raise ValueError(f"{name}: stats='activation' with rounding='llama' is not modelled")
    if not (isinstance(v.weight_offset, (int, float)) and abs(v.weight_offset) <= 16.0):
        raise ValueError(f"{name}: weight_offset must be a number in [-16, 16], not {v.weight_offset!r}")
    v.weight_offset = float(v.weight_offset)
    if any(existing.name == name for existing in _registry):
        raise ValueError(f"{name}: registered twice")
    _registry.append(v)
    return v


def rmsnorm(name: str, *, forward: Callable, backward: Callable, **kw) -> Variant:
    """Registers an RMSNorm variant (see the module's docstring for the calls)."""
    return _register("rmsnorm", name, forward=forward, backward=backward, **kw)


def layernorm(name: str, *, forward: Callable, backward: Callable, **kw) -> Variant:
    """Registers a LayerNorm variant (see the module's docstring for the calls)."""
    return _register("layernorm", name, forward=forward, backward=backward, **kw)


def variants() -> List[Variant]:
    return list(_registry)


def find(name: str) -> Optional[Variant]:
    return next((v for v in _registry if v.name == name), None)
