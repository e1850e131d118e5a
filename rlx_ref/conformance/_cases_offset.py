"""Norms and reductions over rows with a large common offset and rows that cancel.

``1e4 + N(0, s)`` (``1e6`` in f64; ``s`` at least four spacings of the dtype at the offset,
so the spread survives rounding) is where a mean or variance accumulated in a narrow type,
or a one-pass ``E[x²] − E[x]²``, loses its digits. Cancelling rows hold ``±v`` pairs of
size ~1e3 in shuffled order plus a small remainder, so the true sum is far smaller than
its terms. Kinds: LayerNorm, RmsNorm, GroupNorm, Softmax (offset only: it is shift
invariant), Reduce Sum and Mean, and the variance ``Mean((x − Mean(x))²)`` as a graph.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ops.opdef import get
from ._cases_red import RowOp
from .cases import Spec, make_case
from .model import Case
from .rng import CounterRNG

DTYPES = (DType.F32, DType.F64, DType.F16, DType.BF16)
OFFSET = {DType.F64: 1e6}            # every other dtype: 1e4
ROW_LENGTHS = {DType.F32: (33, 1000, 4099), DType.F64: (33, 1000)}
OTHER_LENGTHS = (33, 1000)
ROW_KINDS = ("LayerNorm", "RmsNorm", "Softmax", "Reduce.Sum", "Reduce.Mean")
NO_CANCEL = ("Softmax",)


def _rng(seed, *parts) -> CounterRNG:
    return CounterRNG(seed, "/".join(str(p) for p in parts))


def offset_of(dt: DType) -> float:
    return OFFSET.get(dt, 1e4)


def spread_of(dt: DType) -> float:
    """The noise scale: 1, or four spacings of ``dt`` at the offset if that is more."""
    spacing = float(ml_dtypes.finfo(dt.np).eps) * offset_of(dt)
    return max(1.0, 4.0 * spacing)


def offset_rows(rng, rows: int, n: int, dt: DType) -> np.ndarray:
    """``offset + N(0, spread)``, rounded once to ``dt``."""
    z = rng.standard_normal((rows, n)) * spread_of(dt) + offset_of(dt)
    return z.astype(dt.np)


def cancel_rows(rng, rows: int, n: int, dt: DType) -> np.ndarray:
    """Rows of ±v pairs (|v| ~ 1e3, exactly representable negations) in shuffled order,
    plus small terms: each row's sum is tiny next to its terms."""
    half = n // 2
    out = np.empty((rows, n), np.float64)
    for r in range(rows):
        v = (rng.standard_normal(half) * 1e3).astype(dt.np).astype(np.float64)
        tail = rng.standard_normal(n - 2 * half) * 1e-2
        row = np.concatenate([v, -v, tail])
        out[r] = row[rng.permutation(n)]
    return out.astype(dt.np)


def _row_op(name: str) -> RowOp:
    kind, _, sub = name.partition(".")
    return RowOp(kind, sub or None)


def _group_norm(x: np.ndarray, tags, source) -> Spec:
    """GroupNorm over [1, C, n]: 2 groups of C/2 channels."""
    c = x.shape[1]
    g = (1.0 + 0.1 * np.arange(c) / c).astype(x.dtype)
    b = (0.01 * np.arange(c)).astype(x.dtype)
    return Spec("GroupNorm", get("GroupNorm").attrs(2, 1e-5), (x, g, b), tuple(tags),
                source=source)


def offset_specs(kind: str, seed: int) -> list[Spec]:
    """The offset and cancellation Specs of one kind (empty for other kinds)."""
    names = [n for n in ROW_KINDS if n.partition(".")[0] == kind]
    out = []
    for dt in DTYPES:
        for n in ROW_LENGTHS.get(dt, OTHER_LENGTHS):
            for what, make in (("offset", offset_rows), ("cancel", cancel_rows)):
                tags = (what, f"len-{n}")
                if kind == "GroupNorm":
                    x = make(_rng(seed, kind, what, dt, n), 4, n, dt)[None]
                    out.append(_group_norm(x, tags, what))
                for name in names:
                    if what == "cancel" and name in NO_CANCEL:
                        continue
                    x = make(_rng(seed, name, what, dt, n), 2, n, dt)
                    out.append(_row_op(name).spec(x, 1, tags, what))
    return out


def variance_cases(seed: int) -> list[Case]:
    """``multi:variance``: Mean((x − Mean(x, keep))²) over rows, offset and cancelling."""
    out = []
    for dt in DTYPES:
        for what, make in (("offset", offset_rows), ("cancel", cancel_rows)):
            n = 1000
            x = make(_rng(seed, "multi:variance", what, dt, n), 2, n, dt)
            g = Graph("variance")
            xi = g.input("x", list(x.shape), dt)
            d = g.sub(xi, g.mean(xi, (1,), True))
            g.set_outputs([g.mean(g.mul(d, d), (1,))])
            out.append(make_case("multi:variance", dt.display, g, {"x": x},
                                 ("multi-op", what, f"len-{n}"), None, (), seed, "multi"))
    return out


OFFSET_KINDS = ("LayerNorm", "RmsNorm", "GroupNorm", "Softmax", "Reduce")
