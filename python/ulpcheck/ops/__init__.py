"""The ops the Python door knows: one module each, this side's folder of the op.

Each module declares OP, an Op: the spec options its variants may set, the
rules between them, and the entry points the worker serves (python -m
ulpcheck.worker calls them with the variant and the call). ulpcheck/__init__.py
and worker.py meet ops only through OPS, never by name, and spec options only
through their SpecOption. Adding an op here: its module, and one line below.
"""

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class SpecOption:
    """One spec option a variant may declare (ulpcheck.rmsnorm(..., bias_variants=True)):
    the Python face of a spec field, whose C++ descriptor reads it
    (SpecField::option and declared)."""
    name: str
    default: Any
    check: Callable[[Any], Any]            # value -> the value kept; raises ValueError saying what it must be


@dataclasses.dataclass(frozen=True)
class Op:
    name: str                              # as the C++ side names it ("rmsnorm")
    spec_options: Tuple[SpecOption, ...]   # the spec options its variants may set
    entries: Dict[str, Callable]           # entry point ("rmsnorm_forward") -> function(variant, call)
    # Rules between its options (and the variant's other fields): variant -> what is wrong, or None.
    rules: Tuple[Callable[[Any], Optional[str]], ...] = ()
    # Its variants run every rank at once, one worker process per rank (allreduce_rmsnorm).
    multi_rank: bool = False


from . import (allreduce_rmsnorm, fused_add_rmsnorm, fused_add_rmsnorm_quant, layernorm,  # noqa: E402  (the registration list)
               rmsnorm, rmsnorm_quant)

OPS: Dict[str, Op] = {m.OP.name: m.OP for m in (rmsnorm, layernorm, fused_add_rmsnorm, allreduce_rmsnorm,
                                                rmsnorm_quant, fused_add_rmsnorm_quant)}


def serving(entry: str) -> Op:
    """The op whose worker side serves `entry`."""
    for op in OPS.values():
        if entry in op.entries:
            return op
    raise ValueError(f"unknown entry point {entry!r}")
