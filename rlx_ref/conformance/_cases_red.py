"""Generated edge cases of the reduction-like kinds: Reduce per sub-op, Softmax, Cumsum,
CumProd, CumMax, ArgMax, ArgMin, TopK, LayerNorm, RmsNorm (tiling along the reduced axis,
strided axes, special values, ties, empty / size-1 / 0-d, non-contiguous inputs)."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ..ops.opdef import get
from ..ops.reduction import REDUCE_OPS
from ._cases_ew import NC, _rng, floats_of, tiling_plan
from ._cases_values import (
    SPECIAL_CLASSES,
    as_dtype,
    int_extremes,
    length_tags,
    special_values,
)
from .cases import Spec

F32 = DType.F32
STRIDED_LENGTHS = (65, 257, 1025)
_NEAR_ONE = ("Prod", "CumProd")         # products of N values stay finite near 1


class RowOp:
    """How to build one reduction-like op over ``axis`` of ``x`` (kind, sub-op, extras)."""

    def __init__(self, kind: str, sub: str | None = None):
        self.kind, self.sub, self.d = kind, sub, get(kind)

    @property
    def name(self) -> str:
        return f"{self.kind}.{self.sub}" if self.sub else self.kind

    def values(self, rng, shape, dt=F32) -> np.ndarray:
        z = rng.standard_normal(shape)
        if self.sub in _NEAR_ONE or self.kind in _NEAR_ONE:
            z = 1.0 + 0.05 * z
        return z.astype(dt.np)

    def spec(self, x, axis: int, tags, source: str, nc=(), k: int = 3) -> Spec:
        x = np.asarray(x)
        a, kind, inputs, out = self.d.attrs, self.kind, (x,), None
        if kind == "Reduce":
            attrs = a(self.sub, tuple(range(x.ndim)) if axis is None else (axis,), False)
        elif kind == "Softmax":
            attrs = a(axis)
        elif kind in ("Cumsum", "CumProd", "CumMax"):
            attrs = a(axis, False)
        elif kind in ("ArgMax", "ArgMin"):
            attrs = a(axis % x.ndim, False)
        elif kind == "TopK":
            k = min(k, x.shape[-1])
            attrs, out = a(k), Shape(x.shape[:-1] + (k,), DType.of(x))
        else:                                   # LayerNorm, RmsNorm
            n = x.shape[axis]
            g = (1.0 + 0.1 * np.arange(n) / max(n, 1)).astype(x.dtype)
            b = (0.01 * np.arange(n)).astype(x.dtype)
            attrs, inputs = a(axis, 1e-5), (x, g, b)
        return Spec(kind, attrs, inputs, tuple(tags), out, tuple(nc), source)


def _rows(v: np.ndarray) -> np.ndarray:
    """Two rows holding every value, in opposite orders."""
    return np.stack([v, v[::-1]])


def _ties(dt: DType, largest: bool) -> np.ndarray:
    rows = [[3, 1, 3, 3, 0], [-0.0, 0.0, -0.0, -1, -1], [2, 2, 2, 2, 2], [np.nan, 5, 1, 5, 5]]
    x = np.array(rows, np.float64) * (1 if largest else -1)
    if not dt.is_float:
        x = np.nan_to_num(x, nan=0.0)
    return x.astype(dt.np)


def _long_ties(rng, n: int, largest: bool) -> np.ndarray:
    """Two rows of length n whose extreme value repeats across block boundaries."""
    x = rng.standard_normal((2, n))
    x[0, [n - 1, n // 2]] = 10.0
    x[1, sorted({1 % n, 64 % n, n - 1})] = 10.0
    return (x if largest else -x).astype(np.float32)


def _structural(op: RowOp, seed: int) -> list[Spec]:
    r = _rng(seed, op.name, "shape")
    out = [
        op.spec(op.values(r, (3, 1)), 1, ("size-1",), "shape"),
        op.spec(np.zeros((0, 5), np.float32), 1, ("empty",), "shape"),
        op.spec(op.values(r, (3, 10)), 1, NC, "shape", ("x0",)),
    ]
    if op.kind != "TopK":
        out.append(op.spec(op.values(r, (10, 3)), 0, NC + ("strided-axis",), "shape", ("x0",)))
    if op.kind == "Reduce":
        out.append(op.spec(np.asarray(op.values(r, (1,))[0]), None, ("0-d",), "shape"))
    return out


def _row_edges(op: RowOp, seed: int, int_ok: bool) -> list[Spec]:
    out = []
    for dt, n in tiling_plan(op.kind):
        x = op.values(_rng(seed, op.name, "tiling", dt, n), (2, n), dt)
        out.append(op.spec(x, 1, length_tags(n), "tiling", k=4))
    if op.kind != "TopK":
        for n in STRIDED_LENGTHS:
            x = op.values(_rng(seed, op.name, "strided", n), (n, 3))
            out.append(op.spec(x, 0, length_tags(n) + ("strided-axis",), "tiling"))
    if op.kind == "Reduce":
        for n in (257, 1025):
            x = op.values(_rng(seed, op.name, "all-axes", n), (n,))
            out.append(op.spec(x, None, length_tags(n) + ("0-d", "all-axes"), "tiling"))
    for dt in floats_of(op.kind):
        out += [op.spec(_rows(special_values(dt, c)), 1, (c,), "specials")
                for c in SPECIAL_CLASSES]
    if int_ok:
        out.append(op.spec(_rows(int_extremes(DType.I32)), 1, ("extremes", "int"),
                           "specials"))
    return out + _structural(op, seed)


def _domain(op: RowOp) -> list[Spec]:
    """Rows at a kernel's numeric edges: zero variance, all -inf, ±0 extremes."""
    out = []
    for dt in floats_of(op.kind):
        if op.kind in ("LayerNorm", "RmsNorm"):
            x = as_dtype([[2.5] * 5, [0.0] * 5, [-0.0] * 5], dt)
        elif op.kind == "Softmax":
            x = as_dtype([[-np.inf] * 4, [-np.inf, 0.0, -np.inf, 1.0], [1e4, -1e4, 0, 1]], dt)
        elif op.sub in ("Max", "Min") or op.kind == "CumMax":
            x = as_dtype([[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0], [np.nan, -0.0, 0.0]], dt)
        else:
            continue
        out.append(op.spec(x, 1, ("domain-edge", "±0"), "domain"))
    return out


def _tie_edges(op: RowOp, seed: int) -> list[Spec]:
    largest = op.kind != "ArgMin"
    out = [op.spec(_ties(dt, largest), 1, ("ties",), "ties")
           for dt in floats_of(op.kind) + [DType.I32]]
    for n in STRIDED_LENGTHS:
        x = _long_ties(_rng(seed, op.name, "ties", n), n, largest)
        out.append(op.spec(x, 1, ("ties",) + length_tags(n), "ties"))
    return out


_INT_KINDS = ("Reduce", "Cumsum", "CumMax", "ArgMax", "ArgMin", "TopK")


def reduction_edges(kind: str, seed: int) -> list[Spec]:
    """Every generated edge case of one reduction-like kind."""
    ops = [RowOp(kind, s) for s in REDUCE_OPS] if kind == "Reduce" else [RowOp(kind)]
    out = []
    for op in ops:
        int_ok = kind in _INT_KINDS and op.sub != "Mean"
        out += _row_edges(op, seed, int_ok) + _domain(op)
        if kind in ("ArgMax", "ArgMin", "TopK"):
            out += _tie_edges(op, seed)
    return out


KINDS = ("Reduce", "Softmax", "Cumsum", "CumProd", "CumMax", "ArgMax", "ArgMin", "TopK",
         "LayerNorm", "RmsNorm")
