"""Indexing family, part 2: ScatterAdd, ScatterElements, ScatterNd (imported by indexing.py).

All three write ``updates`` into a copy of a destination (zeros for ScatterAdd) at
positions given by an index tensor, combining with what is there per the reduction.
Writes happen in row-major order of the update positions, so with duplicate targets
``None`` keeps the last update and Add/Mul accumulate in that order (as RLX's CPU).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, per_op, reduction
from ..ir.dtype import ALL_DTYPES, DType
from ..ir.shape import Dyn, Shape
from ._indexing_index import check_index_dtype, decode, in_range
from .codec import INT, Enum, attr
from .indexing import axis_i32, nd_coords, nd_index_depth
from .movement import same_dim
from .opdef import OpDef, Sample, compute_dtype, register, want

_F = np.float32

# reduction -> how an update combines with the value already there
REDUCTIONS = {
    "None": "overwrite (with duplicate targets the last update in row-major order wins)",
    "Add": "existing + update", "Mul": "existing · update",
    "Max": "max(existing, update), NaN-ignoring (a NaN operand yields the other)",
    "Min": "min(existing, update), NaN-ignoring",
}
REDUCTION_ENUM = Enum("ScatterNdReduction", units=tuple(REDUCTIONS))
_UFUNC = {"Add": np.add, "Mul": np.multiply, "Max": np.fmax, "Min": np.fmin}
_REDUCTION_DOC = "\n".join(f"- `{k}`: {v}" for k, v in REDUCTIONS.items())


def scatter(out: np.ndarray, coords: tuple, updates: np.ndarray, reduction: str):
    """Write ``updates`` at ``out[coords]`` in place; coords address out's leading axes."""
    if reduction != "None":
        _UFUNC[reduction].at(out, coords, updates)   # unbuffered: duplicates all apply
        return out
    k = len(coords)
    targets = np.broadcast_arrays(*coords) if coords else []
    if updates.size == 0 or not targets or targets[0].size == 0:
        return out
    lin = np.ravel_multi_index(targets, out.shape[:k]).ravel()   # one id per target slice
    rows = updates.reshape((lin.size,) + out.shape[k:])
    # the last write of each target wins: its first occurrence in the reversed order
    _, first_rev = np.unique(lin[::-1], return_index=True)
    last = lin.size - 1 - first_rev
    out.reshape((-1,) + out.shape[k:])[lin[last]] = rows[last]
    return out


def _run(dest: np.ndarray, coords, updates, reduction):
    """Scatter in f32 for f16/bf16 (rounded once at the end), else in the dtype itself."""
    work = compute_dtype(dest).copy()
    scatter(work, coords, compute_dtype(updates).astype(work.dtype), reduction)
    return work.astype(dest.dtype)


# ── ScatterAdd ────────────────────────────────────────────────────────────

def _check_scatter_add(shapes, a, out):
    upd, idx = shapes
    want(upd.rank >= 1, "(C1) ScatterAdd updates need rank >= 1 ([U, ...trailing])")
    check_index_dtype(idx.dtype, "ScatterAdd", "C2")
    want(idx.rank == 1 and same_dim(idx.dims[0], upd.dims[0]),
         f"(C2) ScatterAdd indices must be [U] with U = updates.dims[0]: indices "
         f"{idx.dims_text()}, updates {upd.dims_text()}")
    want(out.rank == upd.rank and all(same_dim(p, q) for p, q in
                                      zip(out.dims[1:], upd.dims[1:])),
         f"(C3) ScatterAdd output {out.dims_text()} must be [out_dim] ++ updates' trailing "
         f"dims {list(upd.dims[1:])}")
    want(out.dtype == upd.dtype, f"(C3) ScatterAdd output dtype {out.dtype} differs from "
                                 f"updates dtype {upd.dtype}")


def _ref_scatter_add(ctx, updates, indices):
    dims = ctx.out_dims
    i = in_range(decode(indices, "ScatterAdd", "C4"), dims[0], 0, "ScatterAdd", "C4",
                 negative_ok=False)
    return _run(np.zeros(dims, updates.dtype), (i,), updates, "Add")


def _out(*dims):
    return Shape(dims, DType.F32)


def _scatter_add_samples(rng):
    upd = np.arange(1, 7, dtype=_F).reshape(3, 2)
    return [
        Sample((upd, np.array([2, 0, 2], _F)), None, _out(4, 2), tags=("duplicates",),
               expect=np.array([[3, 4], [0, 0], [6, 8], [0, 0]], _F)),
        Sample((upd, np.array([1, 0, 2], _F)), None, _out(3, 2), tags=("permutation",)),
        Sample((np.arange(5, dtype=_F), np.array([0, 0, 0, 0, 0], np.int64)), None, _out(1),
               tags=("int", "size-1", "prime-length"), expect=np.array([10], _F)),
        Sample((np.zeros((0, 2), _F), np.zeros(0, _F)), None, _out(3, 2), tags=("empty",)),
        Sample((rng.standard_normal((2, 3)), np.array([1, 1], _F)), None,
               Shape((2, 3), DType.F64),
               tags=("f64",)),
    ]


register(OpDef(
    kind="ScatterAdd", family="indexing", payload="unit", arity=2,
    check=_check_scatter_add, reference=_ref_scatter_add, input_names=("updates", "indices"),
    doc="The unpermute half of MoE routing: starts from zeros of the declared shape "
        "`[out_dim, ...trailing]` and adds row `updates[i]` into row `indices[i]`, so "
        "duplicate indices accumulate (in order of i). `out_dim` comes from the declared "
        "output shape. Indices are f32-encoded integers in `0..out_dim-1`; negatives do "
        "not wrap.",
    constraints=("C1: updates have rank >= 1: [U, ...trailing].",
                 "C2: indices are [U], a float (integral values) or integer tensor.",
                 "C3: the declared output is [out_dim, ...trailing] with updates' dtype.",
                 "C4: at run time every index is an integer in 0..out_dim-1."),
    samples=_scatter_add_samples, dtypes=ALL_DTYPES,
    accuracy=reduction(2, lambda a, s: s[0].dims[0], operands=(0,)),  # K = U updates
    notes="Payload is the unit variant of RLX 01df7d9 (later RLX adds an `axis` field that "
          "must be 0). RLX's CPU kernel maps negative indices to 0 and does not check the "
          "upper bound in release builds; here both are errors.",
))


# ── ScatterElements ───────────────────────────────────────────────────────

@dataclass(frozen=True)
class ScatterElementsAttrs:
    axis: int = attr(INT, doc="the axis whose coordinate the indices replace (may be < 0)")
    reduction: str = attr(REDUCTION_ENUM, doc="how an update combines with the target")


def _infer_scatter_elements(shapes, a):
    data, idx, upd = shapes
    want(data.rank >= 1, "(C1) ScatterElements needs data of rank >= 1")
    ax = axis_i32(a.axis, data.rank, "C1")
    check_index_dtype(idx.dtype, "ScatterElements", "C2")
    want(idx.rank == data.rank and upd.rank == idx.rank and
         all(same_dim(p, q) for p, q in zip(idx.dims, upd.dims)),
         f"(C3) indices {idx.dims_text()} and updates {upd.dims_text()} must have one shape "
         f"of data's rank {data.rank}")
    for d, (n, m) in enumerate(zip(idx.dims, data.dims)):
        want(d == ax or isinstance(n, Dyn) or isinstance(m, Dyn) or n <= m,
             f"(C3) indices dim {d} is {n} but data dim {d} is only {m}")
    want(upd.dtype == data.dtype, f"(C4) updates dtype {upd.dtype} differs from data dtype "
                                  f"{data.dtype}")
    return data


def _ref_scatter_elements(ctx, data, indices, updates):
    ax = axis_i32(ctx.attrs.axis, data.ndim, "C1")
    i = in_range(decode(indices, "ScatterElements", "C5"), data.shape[ax], ax,
                 "ScatterElements", "C5", negative_ok=True)
    coords = list(np.indices(i.shape, sparse=True))    # target = update position ...
    coords[ax] = i                                      # ... with the axis coordinate replaced
    return _run(data, tuple(coords), updates, ctx.attrs.reduction)


def _scatter_elements_samples(rng):
    data = np.arange(1, 10, dtype=_F).reshape(3, 3)
    idx = np.array([[1, 0, 1]], _F)
    upd = np.array([[10, 20, 30]], _F)
    out = [Sample((data, idx, upd), ScatterElementsAttrs(0, r), tags=("reduction",))
           for r in REDUCTIONS]
    dup = np.array([[0, 0], [2, 2]], _F)
    return out + [
        Sample((data, idx, upd), ScatterElementsAttrs(0, "None"),
               expect=np.array([[1, 20, 3], [10, 5, 30], [7, 8, 9]], _F)),
        Sample((data, dup, np.array([[1, 2], [3, 4]], _F)), ScatterElementsAttrs(1, "None"),
               tags=("duplicates",), expect=np.array([[2, 2, 3], [4, 5, 4], [7, 8, 9]], _F)),
        Sample((data, dup, np.array([[1, 2], [3, 4]], _F)), ScatterElementsAttrs(1, "Add"),
               tags=("duplicates",), expect=np.array([[4, 2, 3], [4, 5, 13], [7, 8, 9]], _F)),
        Sample((data, np.array([[-1], [-3], [0]], _F), np.full((3, 1), -5, _F)),
               ScatterElementsAttrs(-1, "Max"), tags=("negative-index", "negative-axis")),
        Sample((np.array([np.nan, 1, 2], _F), np.array([0, 1], _F), np.array([5, np.nan], _F)),
               ScatterElementsAttrs(0, "Min"), tags=("nan",),
               expect=np.array([5, 1, 2], _F)),
        Sample((data, np.zeros((0, 3), _F), np.zeros((0, 3), _F)),
               ScatterElementsAttrs(0, "Add"), tags=("empty",)),
        Sample((np.arange(5, dtype=np.int32), np.array([4, 0], np.int64),
                np.array([7, 7], np.int32)), ScatterElementsAttrs(0, "Mul"),
               tags=("int", "prime-length")),
        Sample((rng.standard_normal(3).astype(np.float16), np.array([2, 2], _F),
                np.array([1, 2], np.float16)), ScatterElementsAttrs(0, "Add"), tags=("f16",)),
        Sample((rng.standard_normal((2, 2)), np.array([[1], [0]], _F),
                rng.standard_normal((2, 1))), ScatterElementsAttrs(0, "None"), tags=("f64",)),
    ]


register(OpDef(
    kind="ScatterElements", family="indexing", attrs=ScatterElementsAttrs, payload="struct",
    arity=3, infer=_infer_scatter_elements, check=lambda s, a, o: _infer_scatter_elements(s, a),
    reference=_ref_scatter_elements, input_names=("data", "indices", "updates"),
    doc="ONNX ScatterElements: the output starts as a copy of `data`; for every position p "
        "of `indices` (row-major), the element at p with coordinate `axis` replaced by "
        "`indices[p]` is combined with `updates[p]`. `axis` and indices may be negative "
        "(count from the end). Reductions:\n\n" + _REDUCTION_DOC,
    constraints=("C1: data rank >= 1 and -rank <= axis < rank.",
                 "C2: indices are a float (integral values) or integer tensor.",
                 ("C3: indices and updates share one shape of data's rank, no larger than "
                 "data's off `axis`."),
                 "C4: updates have data's dtype.",
                 "C5: at run time every index is an integer in -dims[axis]..dims[axis]-1."),
    samples=_scatter_elements_samples, dtypes=ALL_DTYPES,
    accuracy=per_op({   # Add: every update may land on one target; Mul: relative
        "None": exact(True), "Max": exact(), "Min": exact(),
        "Add": reduction(2, lambda a, s: s[2].numel, operands=(0, 2)),
        "Mul": reduction(2, lambda a, s: s[2].numel, "value")}, key="reduction"),
    notes="RLX's older CPU kernel clamps indices (negatives to 0) and zeroes non-finite "
          "values of the copied data; here out-of-range indices are errors, negatives count "
          "from the end (ONNX) and data is copied as is. ONNX leaves duplicate targets "
          "with reduction None undefined; here the last update wins (RLX's sequential CPU "
          "order). Max/Min ignore NaN as RLX's CPU kernel (rlx-cpu onnx_ref.rs apply_f32: "
          "Rust's f32::max/min return the non-NaN operand).",
))


# ── ScatterNd ─────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ScatterNdAttrs:
    reduction: str = attr(REDUCTION_ENUM, doc="how an update combines with the target")


def _infer_scatter_nd(shapes, a):
    data, idx, upd = shapes
    check_index_dtype(idx.dtype, "ScatterNd", "C1")
    k = nd_index_depth(data, idx, 0, "ScatterNd", "C2")
    want_dims = idx.dims[:-1] + data.dims[k:]
    want(upd.rank == len(want_dims) and all(same_dim(p, q) for p, q in
                                            zip(upd.dims, want_dims)),
         f"(C3) updates are {upd.dims_text()}, expected indices.dims[:-1] ++ data.dims[{k}:]"
         f" = [{', '.join(str(d) for d in want_dims)}]")
    want(upd.dtype == data.dtype, f"(C3) updates dtype {upd.dtype} differs from data dtype "
                                  f"{data.dtype}")
    return data


def _ref_scatter_nd(ctx, data, indices, updates):
    i = decode(indices, "ScatterNd", "C4")
    return _run(data, nd_coords(data.shape, i, 0, "ScatterNd", "C4"), updates,
                ctx.attrs.reduction)


def _scatter_nd_samples(rng):
    data = np.arange(12, dtype=_F).reshape(3, 4)
    rows = np.array([[1], [0], [1]], _F)
    upd = np.array([[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]], _F)
    out = [Sample((data, rows, upd), ScatterNdAttrs(r), tags=("duplicates", "reduction"))
           for r in REDUCTIONS]
    return out + [
        Sample((data, rows, upd), ScatterNdAttrs("None"), tags=("duplicates",),
               expect=np.array([[2, 2, 2, 2], [3, 3, 3, 3], [8, 9, 10, 11]], _F)),
        Sample((data, np.array([[2, 3], [0, 0]], _F), np.array([-1, -2], _F)),
               ScatterNdAttrs("Add"), tags=("elements",)),
        Sample((data, np.array([[-1, -4]], _F), np.array([100], _F)), ScatterNdAttrs("None"),
               tags=("negative-index",)),
        Sample((data, np.zeros((0, 1), _F), np.zeros((0, 4), _F)), ScatterNdAttrs("Mul"),
               tags=("empty",)),
        Sample((np.arange(7, dtype=np.int32), np.array([[6], [6]], np.int32),
                np.array([2, 3], np.int32)), ScatterNdAttrs("Min"),
               tags=("int", "prime-length")),
        Sample((np.zeros(3, _F), np.array([[2]], _F),
                np.array([4.0], _F)), ScatterNdAttrs("None"), tags=("size-1",)),
        Sample((rng.standard_normal((2, 2)), np.array([[1, 1]], _F),
                rng.standard_normal(1)), ScatterNdAttrs("Max"), tags=("f64",)),
    ]


register(OpDef(
    kind="ScatterNd", family="indexing", attrs=ScatterNdAttrs, payload="struct", arity=3,
    infer=_infer_scatter_nd, check=lambda s, a, o: _infer_scatter_nd(s, a),
    reference=_ref_scatter_nd, input_names=("data", "indices", "updates"),
    doc="ONNX ScatterND: the output starts as a copy of `data`; the last axis of `indices` "
        "holds index tuples of length `k` into data's first `k` axes, and for each tuple u "
        "(row-major) the slice `out[indices[u]]` is combined with `updates[u]`, so updates "
        "are `indices.dims[:-1] ++ data.dims[k:]`. Negative indices count from the end. "
        "Reductions:\n\n" + _REDUCTION_DOC,
    constraints=("C1: indices are a float (integral values) or integer tensor.",
                 "C2: indices have rank >= 1 and 1 <= k <= rank(data) (k static).",
                 "C3: updates are indices.dims[:-1] ++ data.dims[k:] with data's dtype.",
                 ("C4: at run time every index is an integer in -d..d-1 for the axis of size "
                 "d it addresses.")),
    samples=_scatter_nd_samples, dtypes=ALL_DTYPES,
    accuracy=per_op({
        "None": exact(True), "Max": exact(), "Min": exact(),
        "Add": reduction(2, lambda a, s: s[2].numel, operands=(0, 2)),
        "Mul": reduction(2, lambda a, s: s[2].numel, "value")}, key="reduction"),
    notes="RLX's CPU kernel clamps out-of-range indices to the axis; here they are errors. "
          "ONNX leaves duplicate tuples with reduction None undefined; here the last wins. "
          "Max/Min ignore NaN and duplicates combine in row-major order, as RLX's CPU "
          "kernel (rlx-cpu onnx_ref.rs scatter_nd_into_f32, f32::max/min).",
))
