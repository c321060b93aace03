"""The ops the Python door knows: one module each, this side's folder of the op.

Each module declares OP, an Op: the spec options its variants may set and the
entry points the worker serves (python -m ulpcheck.worker calls them with the
variant and the call). ulpcheck/__init__.py and worker.py meet ops only
through OPS, never by name. Adding an op here: its module, and one line below.
"""

import dataclasses
from typing import Callable, Dict, Tuple


@dataclasses.dataclass(frozen=True)
class Op:
    name: str                              # as the C++ side names it ("rmsnorm")
    spec_options: Tuple[str, ...]          # Variant fields beyond the common ones its variants may set
    entries: Dict[str, Callable]           # entry point ("rmsnorm_forward") -> function(variant, call)


from . import layernorm, rmsnorm  # noqa: E402  (the registration list)

OPS: Dict[str, Op] = {m.OP.name: m.OP for m in (rmsnorm, layernorm)}


def serving(entry: str) -> Op:
    """The op whose worker side serves `entry`."""
    for op in OPS.values():
        if entry in op.entries:
            return op
    raise ValueError(f"unknown entry point {entry!r}")
