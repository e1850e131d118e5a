"""Indexing family: Gather, GatherElements, GatherNd (this file) and ScatterAdd,
ScatterElements, ScatterNd (``_indexing_scatter.py``).

Index tensors are f32 holding integral values, as RLX passes them (integer tensors are
accepted too). The oracle never clamps or wraps an index silently: a fractional or
out-of-range index is an error naming the node, the position, the axis and the valid
range. Negative indices count from the end only where RLX's semantics say so
(GatherElements, GatherNd, ScatterElements, ScatterNd: ONNX rules); Gather and
ScatterAdd reject them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import ALL_DTYPES
from ..ir.shape import Dyn, Shape
from ._indexing_index import check_index_dtype, decode, in_range
from .codec import INT, USIZE, attr
from .movement import check_axis, same_dim
from .opdef import OpDef, Sample, register, want

_F = np.float32


def _idx(values, dtype=_F):
    return np.array(values, dtype)


def axis_i32(axis: int, rank: int, cid: str) -> int:
    """An i32 axis field: negatives count from the end (RLX: ``rank + axis``)."""
    want(-rank <= axis < rank, f"({cid}) axis {axis} is out of range for rank {rank} "
                               f"(expected {-rank}..{rank - 1})")
    return axis % rank


# ── Gather ────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class GatherAttrs:
    axis: int = attr(USIZE, doc="the table axis the indices select along")


def _infer_gather(shapes, a):
    table, idx = shapes
    check_axis(a.axis, table.rank, "C1")
    check_index_dtype(idx.dtype, "Gather", "C2")
    dims = table.dims[:a.axis] + idx.dims + table.dims[a.axis + 1:]
    return table.with_dims(dims)


def _ref_gather(ctx, table, indices):
    ax = ctx.attrs.axis
    i = in_range(decode(indices, "Gather", "C3"), table.shape[ax], ax, "Gather", "C3",
                 negative_ok=False)
    return np.take(table, i, axis=ax)


def _gather_samples(rng):
    table = np.arange(12, dtype=_F).reshape(4, 3)
    return [
        Sample((table, _idx([2, 0, 2])), GatherAttrs(0), tags=("embedding",),
               expect=table[[2, 0, 2]]),
        Sample((table, _idx([[1], [2]])), GatherAttrs(1), tags=("axis>0",),
               expect=table[:, [[1], [2]]]),
        Sample((table, _F(3)), GatherAttrs(0), tags=("0-d",), expect=table[3]),
        Sample((table, np.zeros(0, _F)), GatherAttrs(0), tags=("empty",)),
        Sample((table, np.array([3, 1], np.int64)), GatherAttrs(0), tags=("int",)),
        Sample((rng.standard_normal((5, 2)), _idx([4, 4, 0, 1, 2])), GatherAttrs(0),
               tags=("f64", "prime-length")),
        Sample((np.arange(6, dtype=np.int32), _idx([5, 0])), GatherAttrs(0),
               tags=("int-data",)),
    ]


register(OpDef(
    kind="Gather", family="indexing", attrs=GatherAttrs, payload="struct", arity=2,
    infer=_infer_gather, check=lambda s, a, o: _infer_gather(s, a), reference=_ref_gather,
    input_names=("table", "indices"),
    doc="Selects slices of `table` along `axis` by index (`np.take(table, indices, axis)`): "
        "the output dims are `table.dims[:axis] ++ indices.dims ++ table.dims[axis+1:]`. "
        "With axis 0 this is an embedding lookup. Indices are f32-encoded integers (or an "
        "integer tensor) in `0..dims[axis]-1`; negative indices do not wrap.",
    constraints=("C1: axis < rank(table).",
                 "C2: indices are a float (integral values) or integer tensor.",
                 "C3: at run time every index is an integer in 0..dims[axis]-1."),
    samples=_gather_samples, dtypes=ALL_DTYPES,
    notes="RLX's shape rule gives `indices.dims ++ table.dims[axis+1:]` (it drops the "
          "table dims before `axis`), which matches its own CPU kernel only for axis 0; the "
          "true np.take shape is used here. RLX's CPU kernel maps negative/NaN indices to 0 "
          "and leaves rows of too-large indices unwritten; here both are errors.",
))


# ── GatherElements ────────────────────────────────────────────────────────

@dataclass(frozen=True)
class GatherElementsAttrs:
    axis: int = attr(INT, doc="the axis whose coordinate the indices replace (may be < 0)")


def _infer_gather_elements(shapes, a):
    data, idx = shapes
    want(data.rank >= 1, "(C1) GatherElements needs data of rank >= 1")
    ax = axis_i32(a.axis, data.rank, "C1")
    check_index_dtype(idx.dtype, "GatherElements", "C2")
    want(idx.rank == data.rank, f"(C3) indices rank {idx.rank} differs from data rank "
                                f"{data.rank}")
    for d, (n, m) in enumerate(zip(idx.dims, data.dims)):
        want(d == ax or isinstance(n, Dyn) or isinstance(m, Dyn) or n <= m,
             f"(C3) indices dim {d} is {n} but data dim {d} is only {m} "
             f"(indices {idx.dims_text()}, data {data.dims_text()})")
    return Shape(idx.dims, data.dtype)


def _ref_gather_elements(ctx, data, indices):
    ax = axis_i32(ctx.attrs.axis, data.ndim, "C1")
    i = in_range(decode(indices, "GatherElements", "C4"), data.shape[ax], ax,
                 "GatherElements", "C4", negative_ok=True)
    coords = list(np.indices(i.shape, sparse=True))    # output position = source position
    coords[ax] = i                                      # ... except along `axis`
    return data[tuple(coords)]


def _gather_elements_samples(rng):
    data = np.arange(1, 10, dtype=_F).reshape(3, 3)
    return [
        Sample((data, _idx([[1, 0], [2, 2]])), GatherElementsAttrs(1),
               expect=np.array([[2, 1], [6, 6]], _F)),
        Sample((data, _idx([[2, 0, 1]])), GatherElementsAttrs(0), tags=("size-1",),
               expect=np.array([[7, 2, 6]], _F)),
        Sample((data, _idx([[-1], [-3], [0]])), GatherElementsAttrs(-1),
               tags=("negative-index", "negative-axis"), expect=np.array([[3], [4], [7]], _F)),
        Sample((data, np.zeros((0, 3), _F)), GatherElementsAttrs(0), tags=("empty",)),
        Sample((data, np.array([[0, 1, 2]], np.int32)), GatherElementsAttrs(0),
               tags=("int",)),
        Sample((rng.standard_normal(7), _idx([6, 0, 3])), GatherElementsAttrs(0),
               tags=("f64", "prime-length")),
    ]


register(OpDef(
    kind="GatherElements", family="indexing", attrs=GatherElementsAttrs, payload="struct",
    arity=2, infer=_infer_gather_elements, check=lambda s, a, o: _infer_gather_elements(s, a),
    reference=_ref_gather_elements, input_names=("data", "indices"),
    doc="ONNX GatherElements / `np.take_along_axis`: the output has the indices' shape and "
        "`out[p] = data[p with coordinate axis replaced by indices[p]]`. `axis` may be "
        "negative (counts from the end); so may indices (`i < 0` means `i + dims[axis]`).",
    constraints=("C1: data rank >= 1 and -rank <= axis < rank.",
                 "C2: indices are a float (integral values) or integer tensor.",
                 "C3: indices have data's rank and, off `axis`, dims no larger than data's.",
                 "C4: at run time every index is an integer in -dims[axis]..dims[axis]-1."),
    samples=_gather_elements_samples, dtypes=ALL_DTYPES,
    notes="RLX's shape rule gives the output the indices' dtype; the output here has the "
          "data's dtype (they agree for f32 data with f32 indices).",
))


# ── GatherNd ──────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class GatherNdAttrs:
    batch_dims: int = attr(INT, doc="leading axes shared by data and indices")


def nd_index_depth(data: Shape, idx: Shape, b: int, op: str, cid: str) -> int:
    """k = indices.dims[-1], the number of data axes one index tuple addresses."""
    want(idx.rank >= 1, f"({cid}) {op} indices need rank >= 1, got a 0-d tensor")
    k = idx.dims[-1]
    want(isinstance(k, int), f"({cid}) {op} indices' last dim must be static, got {k}")
    want(1 <= k <= data.rank - b,
         f"({cid}) {op} index tuples have length {k}, expected 1..{data.rank - b} "
         f"(data rank {data.rank}, batch_dims {b})")
    return k


def _infer_gather_nd(shapes, a):
    data, idx = shapes
    b = a.batch_dims
    check_index_dtype(idx.dtype, "GatherNd", "C2")
    want(b >= 0, f"(C1) batch_dims must be >= 0, got {b}")
    want(b == 0 or b < min(data.rank, idx.rank),
         f"(C1) batch_dims {b} must be below both ranks (data rank {data.rank}, indices "
         f"rank {idx.rank})")
    for d in range(b):
        want(same_dim(data.dims[d], idx.dims[d]),
             f"(C1) batch dim {d} differs: data {data.dims_text()}, indices "
             f"{idx.dims_text()}")
    k = nd_index_depth(data, idx, b, "GatherNd", "C3")
    return data.with_dims(idx.dims[:-1] + data.dims[b + k:])


def nd_coords(data_shape, idx, b: int, op: str, cid: str) -> tuple:
    """Index arrays (one per addressed data axis) for ``data[coords]``; batch axes first."""
    lead = idx.shape[:-1]
    batch = [np.indices(lead, sparse=True)[d] for d in range(b)]
    picks = [in_range(idx[..., t], data_shape[b + t], b + t, op, cid, negative_ok=True,
                      pos_suffix=(t,))
             for t in range(idx.shape[-1])]
    return tuple(batch + picks)


def _ref_gather_nd(ctx, data, indices):
    i = decode(indices, "GatherNd", "C4")
    return data[nd_coords(data.shape, i, ctx.attrs.batch_dims, "GatherNd", "C4")]


def _gather_nd_samples(rng):
    data = np.arange(24, dtype=_F).reshape(2, 3, 4)
    return [
        Sample((data, _idx([[1, 2], [0, 0]])), GatherNdAttrs(0), tags=("slices",),
               expect=np.stack([data[1, 2], data[0, 0]])),
        Sample((data, _idx([[1, 0, 3]])), GatherNdAttrs(0), tags=("elements",),
               expect=np.array([data[1, 0, 3]], _F)),
        Sample((data, _idx([[2], [0]])), GatherNdAttrs(1), tags=("batch",),
               expect=np.stack([data[0, 2], data[1, 0]])),
        Sample((data, _idx([[-1, -3]])), GatherNdAttrs(0), tags=("negative-index",),
               expect=data[-1, -3][None]),
        Sample((data, np.zeros((0, 2), _F)), GatherNdAttrs(0), tags=("empty",)),
        Sample((data, _idx([1, 1])), GatherNdAttrs(0), tags=("1-d-indices",),
               expect=data[1, 1]),
        Sample((data, np.array([[0, 2, 1]], np.int64)), GatherNdAttrs(0), tags=("int",)),
        Sample((rng.standard_normal((3, 2)), _idx([[2], [1]])), GatherNdAttrs(0),
               tags=("f64",)),
    ]


register(OpDef(
    kind="GatherNd", family="indexing", attrs=GatherNdAttrs, payload="struct", arity=2,
    infer=_infer_gather_nd, check=lambda s, a, o: _infer_gather_nd(s, a),
    reference=_ref_gather_nd, input_names=("data", "indices"),
    doc="ONNX GatherND: the last axis of `indices` holds index tuples of length "
        "`k = indices.dims[-1]` into the `k` data axes after the first `b = batch_dims` "
        "(which data and indices share). Each tuple selects a slice: the output dims are "
        "`indices.dims[:-1] ++ data.dims[b+k:]`. Negative indices count from the end.",
    constraints=(("C1: 0 <= batch_dims < min(rank(data), rank(indices)) and the first "
                 "batch_dims dims of data and indices agree."),
                 "C2: indices are a float (integral values) or integer tensor.",
                 "C3: indices have rank >= 1 and 1 <= k <= rank(data) - batch_dims (k static).",
                 ("C4: at run time every index is an integer in -d..d-1 for the axis of size "
                 "d it addresses.")),
    samples=_gather_nd_samples, dtypes=ALL_DTYPES,
    notes="RLX has no shape rule for GatherNd (the declared shape is trusted); here the ONNX "
          "shape is inferred. RLX's CPU kernel clamps out-of-range indices and treats a "
          "negative batch_dims as 0; here both are errors.",
))


from . import _indexing_scatter  # noqa: E402,F401  (registers the scatter ops)
