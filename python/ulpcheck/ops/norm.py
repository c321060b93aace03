"""The spec options every norm op shares (core/norm_spec.h's fields): the
weights' dtype, the rounding point, the weight offset and the dtype of the
saved statistics. An op lists the ones it has in its Op.spec_options."""

from . import SpecOption


def flag(name):
    def check(value):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, not {value!r}")
        return value
    return check


def one_of(name, choices):
    def check(value):
        if value not in choices:
            raise ValueError(f"{name} must be {' or '.join(repr(c) for c in choices)}, not {value!r}")
        return value
    return check


def _offset(value):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= 16.0):
        raise ValueError(f"weight_offset must be a number in [-16, 16], not {value!r}")
    return float(value)


# Takes w (gamma) in fp32 beside 16-bit x too, returning dw in fp32 (the spec's wdtype=fp32).
FP32_WEIGHTS = SpecOption("fp32_weights", False, flag("fp32_weights"))
# The one rounding point it implements: "plain" (one rounding) or "llama" (x rstd rounded to x's dtype first).
ROUNDING = SpecOption("rounding", "plain", one_of("rounding", ("plain", "llama")))
# The one weight offset it implements: y = x rstd (offset + w), offset + w in fp32 (Gemma's 1.0).
WEIGHT_OFFSET = SpecOption("weight_offset", 0.0, _offset)
# The dtype of the saved mean/rstd: "fp32", or "activation" (rounded to x's dtype).
STATS = SpecOption("stats", "fp32", one_of("stats", ("fp32", "activation")))


def stats_need_saving(v):
    if v.spec["stats"] != "fp32" and not v.saves_stats:
        return f"stats={v.spec['stats']!r} names the dtype of saved statistics; it saves none (saves_stats)"
    return None


def saved_statistics_used_as_declared(v):
    """LayerNorm's uses_saved_statistics is about the mean and rstd it saves."""
    if v.uses_saved_statistics and not v.saves_stats:
        return "uses_saved_statistics=True says how it uses the statistics it saves; it saves none (saves_stats)"
    return None


RUNNING_MERGES = ("update", "update_unless_vectorized")


def running_means_shape(v):
    """LayerNorm's running_means: (lanes >= 1, vector >= 1, levels >= 0), and
    not beside two_pass_statistics, which says the statistics are not running
    means; running_merges one of RUNNING_MERGES, and only with running_means."""
    if v.running_merges and v.running_merges not in RUNNING_MERGES:
        return f"running_merges must be one of {', '.join(map(repr, RUNNING_MERGES))}, not {v.running_merges!r}"
    if not v.running_means:
        if v.running_merges:
            return "running_merges says how running means merge: declare their shape (running_means) too"
        return None
    shape = v.running_means
    whole = all(isinstance(n, int) and not isinstance(n, bool) for n in shape) if isinstance(shape, tuple) else False
    if not whole or len(shape) != 3 or shape[0] < 1 or shape[1] < 1 or shape[2] < 0:
        return f"running_means must be (lanes >= 1, vector >= 1, levels >= 0), not {shape!r}"
    if v.two_pass_statistics:
        return "running_means declares running-means statistics; two_pass_statistics says they are two-pass"
    return None


def no_layernorm_statistics(v):
    """An RMSNorm (fused or not) has no mean: LayerNorm's declarations about
    its mean, variance and saved statistics are refused (ignored, they would
    have let a user believe a contract was judged)."""
    for name in ("two_pass_statistics", "mean_of_plain_sum", "uses_saved_statistics", "running_means",
                 "running_merges"):
        if getattr(v, name):
            return f"{name} is LayerNorm's (its mean and variance); an RMSNorm has no mean"
    return None
