"""Sorting along an axis: Sort and ArgSort (RLX's linear-algebra batch, "Reduction & indexing").

Both are one stable sort of every line along ``axis``; Sort returns the values, ArgSort
the source indices as values of the input's dtype (RLX's f32-encoded indices, as ArgMax).
RLX's CPU kernel (rlx-cpu ``exec_sort``) sorts a permutation with Rust's stable
``sort_by`` and compares with ``partial_cmp``, reversed for ``descending``: equal values,
-0 and +0 included, keep their input order in both directions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact
from ..ir.dtype import DType
from ..ir.shape import Shape
from ._reduction_arg import _check_index_dtype
from .codec import BOOL, USIZE, attr
from .opdef import Caps, OpDef, Sample, compute_dtype, register, want

DTYPES = (DType.F32, DType.F64, DType.I32)


@dataclass(frozen=True)
class SortAttrs:
    axis: int = attr(USIZE, doc="the axis sorted along (absolute, 0-based)")
    descending: bool = attr(BOOL, doc="largest first (ties still keep input order)")


def _infer(kind):
    def infer(shapes, a):
        x = shapes[0]
        want(a.axis < x.rank, f"(C1) {kind} axis {a.axis} is out of range for rank {x.rank} "
                              f"(input {x}; {kind} needs rank >= 1)")
        return Shape(x.dims, x.dtype)
    return infer


def _check(kind):
    def check(shapes, a, out):
        x = shapes[0]
        want(x.dtype.is_float or x.dtype.is_int,
             f"(C2) {kind} is defined on float and integer tensors, got {x.dtype}")
        if kind == "ArgSort" and a.axis < x.rank:
            _check_index_dtype(kind, x.dtype, x.dims[a.axis], "C3")
    return check


def sort_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable sorting permutation of every line of ``x`` along ``axis``.

    Ties keep input order in both directions (RLX reverses the comparison, not the
    result). NaN: RLX's ``partial_cmp(..).unwrap_or(Equal)`` makes NaN equal to
    everything, which is no order at all (the result depends on the sort algorithm and
    newer Rust sorts may panic), so rlx_ref fixes one: NaN ranks above +inf, last when
    ascending and first when descending, NaNs in input order.
    """
    y = compute_dtype(x)
    if y.dtype.kind == "f":
        nan = np.isnan(y)
        key = np.where(nan, 0, -y if descending else y)
        # lexsort: the last key is primary; NaN first (descending) or last (ascending)
        primary = ~nan if descending else nan
        return _lexsort_axis(key, primary, axis)
    key = ~y if descending else y           # ~v = -v - 1: reverses ints without overflow
    return np.argsort(key, axis=axis, kind="stable")


def _lexsort_axis(key, primary, axis):
    """Stable lexicographic order along ``axis`` by (primary, key)."""
    if key.size == 0:
        return np.zeros(key.shape, np.int64)
    k = np.moveaxis(key, axis, -1)
    p = np.moveaxis(primary, axis, -1)
    flat_k, flat_p = k.reshape(-1, k.shape[-1]), p.reshape(-1, p.shape[-1])
    order = np.empty(flat_k.shape, np.int64)
    for r in range(flat_k.shape[0]):
        order[r] = np.lexsort((flat_k[r], flat_p[r]))
    return np.moveaxis(order.reshape(k.shape), -1, axis)


def _ref_sort(ctx, x):
    order = sort_order(x, ctx.attrs.axis, ctx.attrs.descending)
    return np.ascontiguousarray(np.take_along_axis(x, order, ctx.attrs.axis), ctx.out_np)


def _ref_argsort(ctx, x):
    order = sort_order(x, ctx.attrs.axis, ctx.attrs.descending)
    return np.ascontiguousarray(order, ctx.out_np)


def _samples(arg: bool):
    def samples(rng):
        f = np.float32
        x = rng.standard_normal((3, 7, 2)).astype(f)
        ties = np.array([[2, -1, 2, 0, -1], [5, 5, 5, 5, 5]], f)
        zeros = np.array([0.0, -0.0, 1.0, -0.0, 0.0], f)
        nan = np.array([3, np.nan, -np.inf, 1, np.nan, np.inf], f)
        a = SortAttrs

        def hand(values, order):
            return np.array(order if arg else values, f)

        return [
            Sample((ties,), a(1, False), tags=("ties", "hand"),
                   expect=hand([[-1, -1, 0, 2, 2], [5] * 5],
                               [[1, 4, 3, 0, 2], [0, 1, 2, 3, 4]])),
            Sample((ties,), a(1, True), tags=("ties", "descending", "hand"),
                   expect=hand([[2, 2, 0, -1, -1], [5] * 5],
                               [[0, 2, 3, 1, 4], [0, 1, 2, 3, 4]])),
            Sample((zeros,), a(0, False), tags=("±0", "ties", "hand"),
                   expect=hand([0.0, -0.0, -0.0, 0.0, 1.0], [0, 1, 3, 4, 2])),
            Sample((nan,), a(0, False), tags=("nan", "inf", "hand"),
                   expect=hand([-np.inf, 1, 3, np.inf, np.nan, np.nan], [2, 3, 0, 5, 1, 4])),
            Sample((nan,), a(0, True), tags=("nan", "inf", "descending", "hand"),
                   expect=hand([np.nan, np.nan, np.inf, 3, 1, -np.inf], [1, 4, 5, 0, 3, 2])),
            Sample((x,), a(1, False), tags=("middle-axis", "prime-length")),
            Sample((x,), a(0, True), tags=("descending", "odd")),
            Sample((np.array([[3, -7, 3, 0]], np.int32),), a(1, True), tags=("int", "ties"),
                   expect=np.array([[3, 3, 0, -7]] if not arg else [[0, 2, 3, 1]], np.int32)),
            Sample((np.zeros((2, 0), f),), a(1, False), tags=("empty",)),
        ]
    return samples


for _kind, _arg in (("Sort", False), ("ArgSort", True)):
    _what = ("the source index of each sorted element, as a value of the input's dtype "
             "(RLX's f32-encoded indices, as ArgMax)" if _arg else "the sorted values")
    register(OpDef(
        kind=_kind, family="sort", attrs=SortAttrs, payload="struct", arity=1,
        caps=Caps.NONE, infer=_infer(_kind), check=_check(_kind),
        reference=_ref_argsort if _arg else _ref_sort,
        doc=f"A stable sort of every line along `axis` (ascending, or largest first with "
            f"`descending`); the output has the input's shape and holds {_what}. Equal "
            f"values (-0 and +0 too) keep their input order in both directions. NaN ranks "
            f"above +inf: last ascending, first descending, NaNs in input order.",
        constraints=("C1: axis < rank (the input has rank >= 1).",
                     "C2: the input is a float or integer tensor.")
        + (("C3: every index along the axis is exact in the input's dtype "
            "(f16: axis length <= 2049, bf16: <= 257).",) if _arg else ()),
        samples=_samples(_arg), dtypes=DTYPES, accuracy=exact(signed_zeros=not _arg),
        notes="Follows RLX's CPU kernel (rlx-cpu thunk/ops/linalg.rs exec_sort: a stable "
              "sort_by over partial_cmp, reversed for descending). RLX compares NaN equal to "
              "everything, which is not an order (its result for NaN depends on the sort "
              "algorithm); rlx_ref defines NaN as ranking above +inf. RLX's kernel is f32 "
              "only; rlx_ref also defines f64, f16, bf16 and integer inputs."
              + (" Non-differentiable, as RLX." if _arg else ""),
    ))
