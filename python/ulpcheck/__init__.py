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
             backward(x, w, dy, rstd, eps) -> (dx, dw), or backward=None
             with bias_variants=True, cases with a bias (y = xhat w + b) call
             forward(x, w, eps, bias=b) and backward(..., eps, has_bias=True) -> (dx, dw, db)
  layernorm: forward(x, gamma, beta, eps) -> y, or (y, mean, rstd) with saves_stats=True;
             backward(x, gamma, dy, mean, rstd, eps) -> (dx, dgamma, dbeta)
  fused_add_rmsnorm: forward(x, residual, w, eps) -> (y, residual_out);
             backward(x, residual, w, dy, dresidual_out, eps) -> (dx, dresidual, dw), or backward=None
  allreduce_rmsnorm: forward(x, residual, w, eps, ranks) -> (y, residual_out), on every rank at once,
             each in its own process of a torch.distributed group (ulpcheck/ops/allreduce_rmsnorm.py)
Inputs are torch tensors over ulpcheck's own buffers (x has row stride ld);
results are copied into ulpcheck's poisoned output buffers, so they must
have the output's shape and dtype (statistics: fp32, one per row, or x's
dtype with stats="activation"). A variant declares its contracts honestly:
ulpcheck holds it to them.

cuda_graphs=True runs a variant as serving stacks run theirs: per shape, one
eager warm-up call, then the call captured into a torch.cuda.CUDAGraph over
buffers the worker owns; every call copies the inputs in, replays the graph
and copies the results out. The first replay of each graph is checked
against the later ones (a kernel wrong only there: aiter #4888's class).

unfused_pipeline="other_variant", bitwise_with_unfused=("residual_out", "y")
declares a fused variant's pipeline of separate steps (another registered
variant of the op) and the outputs it equals bit for bit: the
fused_vs_unfused property runs both on every case and compares them.

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

# What this package and the ulpcheck CLI say to each other (the worker
# protocol, the run options and JSON lines the pytest plugin reads): equal to
# `ulpcheck version`'s python-protocol (kPythonProtocol, kernels/plugin/remote.h).
PROTOCOL = 1

DTYPES = ("fp32", "fp16", "bf16")


@dataclasses.dataclass
class Variant:
    op: str
    name: str
    forward: Callable
    backward: Optional[Callable]          # None: forward only (an op whose backward is optional)
    backend: str = "cuda"                 # "cuda" or "host" (CPU tensors)
    dtypes: tuple = DTYPES
    deterministic: bool = True
    batch_invariant: bool = True
    accumulation: str = "fp32"
    # The depth of the sums along a row (over N) and down a column (over M):
    # 0 unknown (ulpcheck assumes the worst any order does); an int, that depth;
    # (lanes, levels), a GPU reduction's shape: lanes lanes each summing its
    # share serially, then a tree of `levels` levels across them, so
    # ceil(n / lanes) + levels (at most n).
    row_depth: object = 0
    col_depth: object = 0
    contiguous_rows: bool = False         # needs ld == N
    aligned_rows: bool = False            # needs 16-byte aligned rows
    max_cols: int = 0
    cols: tuple = ()                      # the hidden sizes to test (a kernel that compiles per N); () any
    min_rows: int = 0                     # the fewest rows a call may have (0: any)
    saves_stats: bool = False             # forward returns rstd (and mean) and backward consumes them
    two_pass_statistics: bool = False     # LayerNorm: mean, then sum (x - mean)^2 (not running means, as Welford)
    mean_of_plain_sum: bool = False       # LayerNorm: mean = fp32 sum of x (any order) / N (within 2 ulp) or * fl(1/N)
    # LayerNorm, running means (not two_pass_statistics): (lanes, vector, levels),
    # lanes lanes each running Welford's update over their share of the row,
    # `vector` consecutive elements at a time, then `levels` levels of merges
    # (Chan's) across them, a merge with an empty side exact. () any tree of
    # merges of row_depth's height.
    running_means: tuple = ()
    # ... and the form of its merges: "" either (the update form or a weighted
    # average n_a/n m_a + n_b/n m_b); "update", every merge
    # mean_a + (mean_b - mean_a) n_b / n, so equal means merge exactly (a
    # constant row's statistics are then exact and judged at full power);
    # "update_unless_vectorized", the update form on rows whose length the
    # vector does not divide (PyTorch: RowwiseMoments beside compute_stats).
    running_merges: str = ""
    # LayerNorm, with saves_stats: y = (x - mean) rstd gamma + beta from the very
    # mean and rstd it returns, a two-pass variance about that mean, and the
    # backward's x-hat = (x - mean) rstd from those it is given; y, rstd and dx
    # are then also judged about what its own statistics give. Not for a kernel
    # that folds the mean into a bias (x * (rstd gamma) + (beta - mean rstd gamma)).
    uses_saved_statistics: bool = False
    compiles_per_shape: bool = False      # JIT-compiles per (dtype, N, M bucket): each first call gets 900 s, not --case-timeout
    cuda_graphs: bool = False             # runs as serving stacks run it: captured per shape, replayed (first replay checked)
    unfused_pipeline: str = ""            # a fused variant's pipeline of separate steps (another variant of the op)
    bitwise_with_unfused: tuple = ()      # ... and the outputs it equals bit for bit ("residual_out", "y")
    ranks: tuple = ()                     # a multi-rank op's world sizes it runs at (() any; CUDA: one GPU per rank)
    description: str = ""
    libraries: tuple = ("torch",)         # modules whose versions are the variant's provenance
    # Its spec options (ulpcheck/ops: fp32_weights, rounding, weight_offset, stats,
    # affine_variants, bias_variants, as its op has them), each set or at its default.
    spec: dict = dataclasses.field(default_factory=dict)

    def describe(self) -> dict:
        d = dataclasses.asdict(self)
        del d["forward"], d["backward"]
        d["has_backward"] = self.backward is not None
        d["dtypes"] = list(self.dtypes)
        d["libraries"] = list(self.libraries)
        d["cols"] = [int(n) for n in self.cols]
        d["bitwise_with_unfused"] = list(self.bitwise_with_unfused)
        d["ranks"] = [int(r) for r in self.ranks]
        d["running_means"] = [int(n) for n in self.running_means] if self.running_means else None
        return d


_registry: List[Variant] = []


def _depth_error(depth) -> Optional[str]:
    def whole(x, least):
        return isinstance(x, int) and not isinstance(x, bool) and x >= least
    if whole(depth, 0) or (isinstance(depth, tuple) and len(depth) == 2 and whole(depth[0], 1) and whole(depth[1], 0)):
        return None
    return f"must be a depth >= 0 or (lanes >= 1, levels >= 0), not {depth!r}"


def _register(op: str, name: str, **kw) -> Variant:
    if op not in ops.OPS:
        raise ValueError(f"{name}: op {op!r} is not one of {', '.join(ops.OPS)}")
    own = {o.name: o for o in ops.OPS[op].spec_options}
    others = {o.name for other in ops.OPS.values() for o in other.spec_options}
    spec = {}
    for option in list(kw):
        if option in own:
            try:
                spec[option] = own[option].check(kw.pop(option))
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        elif option in others:
            raise ValueError(f"{name}: {option} is not among {op}'s specs ({', '.join(own) or 'none'})")
    spec = {o: spec.get(o, own[o].default) for o in own}
    v = Variant(op=op, name=name, spec=spec, **kw)
    if v.backend not in ("cuda", "host"):
        raise ValueError(f"{name}: backend must be 'cuda' or 'host', not {v.backend!r}")
    if v.unfused_pipeline and (v.unfused_pipeline == name or not v.bitwise_with_unfused):
        raise ValueError(f"{name}: unfused_pipeline names another variant, with the outputs it equals "
                         f"(bitwise_with_unfused=('residual_out', ...))")
    if v.cuda_graphs and v.backend != "cuda":
        raise ValueError(f"{name}: cuda_graphs=True needs backend='cuda'")
    if v.ranks and not ops.OPS[op].multi_rank:
        raise ValueError(f"{name}: ranks= names world sizes; {op} runs on one rank")
    if v.cuda_graphs and ops.OPS[op].multi_rank:
        raise ValueError(f"{name}: cuda_graphs=True is not offered for a multi-rank op yet")
    for key in ("row_depth", "col_depth"):
        if (wrong := _depth_error(getattr(v, key))) is not None:
            raise ValueError(f"{name}: {key} {wrong}")
    if not v.dtypes or any(t not in DTYPES for t in v.dtypes):
        raise ValueError(f"{name}: dtypes must be among {DTYPES}, not {v.dtypes!r}")
    for rule in ops.OPS[op].rules:
        if (wrong := rule(v)) is not None:
            raise ValueError(f"{name}: {wrong}")
    if any(existing.name == name for existing in _registry):
        raise ValueError(f"{name}: registered twice")
    _registry.append(v)
    return v


def rmsnorm(name: str, *, forward: Callable, backward: Optional[Callable], **kw) -> Variant:
    """Registers an RMSNorm variant (see the module's docstring for the calls);
    backward=None for an inference kernel without one (dx and dw are then not judged)."""
    return _register("rmsnorm", name, forward=forward, backward=backward, **kw)


def layernorm(name: str, *, forward: Callable, backward: Callable, **kw) -> Variant:
    """Registers a LayerNorm variant (see the module's docstring for the calls)."""
    return _register("layernorm", name, forward=forward, backward=backward, **kw)


def fused_add_rmsnorm(name: str, *, forward: Callable, backward: Optional[Callable] = None, **kw) -> Variant:
    """Registers a fused residual add + RMSNorm variant, forward only unless it
    has a backward (see ulpcheck/ops/fused_add_rmsnorm.py)."""
    return _register("fused_add_rmsnorm", name, forward=forward, backward=backward, **kw)


def allreduce_rmsnorm(name: str, *, forward: Callable, **kw) -> Variant:
    """Registers an allreduce + residual add + RMSNorm variant, run on every
    rank at once (see ulpcheck/ops/allreduce_rmsnorm.py); ranks=(2, 4, 8)
    names the world sizes it runs at."""
    return _register("allreduce_rmsnorm", name, forward=forward, backward=None, **kw)


def rmsnorm_quant(name: str, *, forward: Callable, **kw) -> Variant:
    """Registers an RMSNorm whose output is quantized to FP8, forward only
    (see ulpcheck/ops/rmsnorm_quant.py): quant=, fp8=, overflow=, scaled=
    and inverse= name the spec it implements."""
    return _register("rmsnorm_quant", name, forward=forward, backward=None, **kw)


def fused_add_rmsnorm_quant(name: str, *, forward: Callable, **kw) -> Variant:
    """Registers a fused residual add + RMSNorm whose output is quantized to
    FP8, forward only (see ulpcheck/ops/fused_add_rmsnorm_quant.py):
    fp32_residual= and sum= as fused_add_rmsnorm's, quant=, fp8=, overflow=,
    scaled= and inverse= as rmsnorm_quant's."""
    return _register("fused_add_rmsnorm_quant", name, forward=forward, backward=None, **kw)


def variants() -> List[Variant]:
    return list(_registry)


def find(name: str) -> Optional[Variant]:
    return next((v for v in _registry if v.name == name), None)
