"""Movement family: Reshape, Transpose, Narrow, Slice, Concat, Expand, Reverse (this file)
and Pad, Tile, Trilu, ResizeNearest2x (``_movement_fill.py``).

These ops only move or copy elements: values are never rounded, so every dtype is
accepted and f16/bf16 need no upcast. Axes in ``usize`` fields are absolute (no
negative wrap), as in RLX.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import ALL_DTYPES
from ..ir.shape import Dyn, Shape, broadcast_dims
from .codec import INT, USIZE, ListOf, attr
from .opdef import Caps, OpDef, OpError, Sample, register, want

_F = np.float32


def _arange(*dims, dtype=_F):
    """A small tensor holding 0, 1, 2, ... (distinct values make moves visible)."""
    return np.arange(math.prod(dims), dtype=np.float64).astype(dtype).reshape(dims)


def same_dim(a, b) -> bool:
    """Dims that may be equal: a dynamic dim matches anything."""
    return isinstance(a, Dyn) or isinstance(b, Dyn) or a == b


def run_shape(ctx, x) -> Shape:
    """The concrete shape of a value at run time (for re-checking dynamic dims)."""
    return Shape(x.shape, ctx.out.dtype)


def check_axis(axis: int, rank: int, cid: str) -> None:
    want(0 <= axis < rank,
         f"({cid}) axis {axis} is out of range for rank {rank}"
         + (f" (expected 0..{rank - 1})" if rank else " (a 0-d tensor has no axes)"))


# ── Reshape ───────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ReshapeAttrs:
    new_shape: tuple = attr(ListOf(INT), doc="output dims; at most one -1 (inferred); "
                                             "0 is a literal empty dim")


def reshape_dims(total: int | None, new_shape) -> tuple | None:
    """``new_shape`` with its -1 resolved for ``total`` elements (None: total unknown)."""
    want(sum(d == -1 for d in new_shape) <= 1,
         f"(C1) new_shape {list(new_shape)} has more than one -1")
    for d in new_shape:
        want(d >= -1, f"(C2) new_shape dim {d} is invalid (expected >= 0, or -1 once)")
    if total is None:
        return None
    known = math.prod(d for d in new_shape if d != -1)
    if -1 in new_shape:
        want(known > 0, f"(C3) cannot infer the -1 in {list(new_shape)}: the other dims "
                        "multiply to 0")
        want(total % known == 0, f"(C3) cannot reshape {total} elements to "
                                 f"{list(new_shape)}: {total} is not a multiple of {known}")
        return tuple(total // known if d == -1 else d for d in new_shape)
    want(known == total, f"(C3) cannot reshape {total} elements to {list(new_shape)} "
                         f"({known} elements)")
    return tuple(new_shape)


def _infer_reshape(shapes, a):
    x = shapes[0]
    if x.is_static:
        return x.with_dims(reshape_dims(x.numel, a.new_shape))
    reshape_dims(None, a.new_shape)
    if -1 not in a.new_shape:
        return x.with_dims(a.new_shape)
    syms = x.dynamic_symbols()
    if len(syms) != 1:
        return None         # RLX guesses a symbol here; the declared shape decides instead
    return x.with_dims(Dyn(syms[0]) if d == -1 else d for d in a.new_shape)


def _ref_reshape(ctx, x):
    return x.reshape(reshape_dims(x.size, ctx.attrs.new_shape))


def _reshape_samples(rng):
    x = _arange(2, 3, 4)
    return [
        Sample((x,), ReshapeAttrs((4, -1)), expect=x.reshape(4, 6)),
        Sample((x,), ReshapeAttrs((24,)), tags=("flatten",)),
        Sample((x,), ReshapeAttrs((-1, 1, 3)), tags=("size-1",)),
        Sample((_F(2.5),), ReshapeAttrs((1, 1)), tags=("0-d",)),
        Sample((np.ones((1, 1), _F),), ReshapeAttrs(()), tags=("to-0-d",)),
        Sample((np.zeros((0, 6), _F),), ReshapeAttrs((3, -1, 2)), tags=("empty",)),
        Sample((rng.standard_normal((2, 3)),), ReshapeAttrs((3, 2)), tags=("f64",)),
        Sample((np.arange(7, dtype=np.int32),), ReshapeAttrs((7, 1)),
               tags=("int", "prime-length")),
    ]


register(OpDef(
    kind="Reshape", family="movement", attrs=ReshapeAttrs, payload="struct", arity=1,
    caps=Caps.CONST_FOLDABLE, infer=_infer_reshape, reference=_ref_reshape,
    check=lambda s, a, o: reshape_dims(None, a.new_shape),
    doc="Reinterprets the elements, in row-major order, with the dims `new_shape`; data order "
        "is unchanged. One entry may be -1: it becomes the element count divided by the "
        "product of the other entries. 0 is a literal empty dim (not ONNX's copy-the-input-"
        "dim). With a dynamic input, -1 becomes the input's single dynamic symbol.",
    constraints=("C1: new_shape has at most one -1.",
                 "C2: every other entry is >= 0.",
                 ("C3: the element counts match (with -1: the count is a multiple of the "
                 "product of the other entries, which is not 0).")),
    samples=_reshape_samples, dtypes=ALL_DTYPES,
    notes="RLX's shape rule divides without checking the element count; here a mismatch is "
          "an error. With several dynamic symbols RLX assigns `-1` the ROWS symbol; here "
          "the declared shape is trusted instead.",
))


# ── Transpose ─────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class TransposeAttrs:
    perm: tuple = attr(ListOf(USIZE), doc="output axis i is input axis perm[i]")


def _infer_transpose(shapes, a):
    x = shapes[0]
    want(len(a.perm) == x.rank,
         f"(C1) perm {list(a.perm)} has {len(a.perm)} entries, the input has rank {x.rank}")
    want(sorted(a.perm) == list(range(x.rank)),
         f"(C2) perm {list(a.perm)} is not a permutation of 0..{x.rank - 1}")
    return x.with_dims(x.dims[p] for p in a.perm)


def _transpose_samples(rng):
    x = _arange(2, 3, 5)
    return [
        Sample((_arange(2, 3),), TransposeAttrs((1, 0)), expect=_arange(2, 3).T),
        Sample((x,), TransposeAttrs((2, 0, 1)), tags=("prime-length",)),
        Sample((x,), TransposeAttrs((0, 1, 2)), tags=("identity",)),
        Sample((_F(1.0),), TransposeAttrs(()), tags=("0-d",)),
        Sample((np.zeros((0, 3), _F),), TransposeAttrs((1, 0)), tags=("empty",)),
        Sample((np.ones((1, 4), np.float16),), TransposeAttrs((1, 0)), tags=("f16", "size-1")),
        Sample((np.arange(6, dtype=np.int64).reshape(2, 3),), TransposeAttrs((1, 0)),
               tags=("int",)),
    ]


register(OpDef(
    kind="Transpose", family="movement", attrs=TransposeAttrs, payload="struct", arity=1,
    infer=_infer_transpose, check=lambda s, a, o: _infer_transpose(s, a),
    reference=lambda ctx, x: np.transpose(x, ctx.attrs.perm).copy(),
    doc="Permutes the axes: output axis `i` is input axis `perm[i]`, so "
        "`out[j0, j1, ...] = x[...]` with `j_i` read from input axis `perm[i]` "
        "(`np.transpose(x, perm)`).",
    constraints=("C1: len(perm) == rank.", "C2: perm is a permutation of 0..rank-1."),
    samples=_transpose_samples, dtypes=ALL_DTYPES,
    notes="RLX does not check that perm is a permutation (its CPU kernel silently skips the "
          "op when an entry is >= rank); here it is a verifier error.",
))


# ── Narrow and Slice ──────────────────────────────────────────────────────

@dataclass(frozen=True)
class NarrowAttrs:
    axis: int = attr(USIZE, doc="the axis to cut")
    start: int = attr(USIZE, doc="first kept index")
    len: int = attr(USIZE, doc="how many indices are kept")


def _infer_narrow(shapes, a):
    x = shapes[0]
    check_axis(a.axis, x.rank, "C1")
    n = x.dims[a.axis]
    want(isinstance(n, Dyn) or a.start + a.len <= n,
         f"(C2) narrow [{a.start}, {a.start + a.len}) is out of range for axis {a.axis} "
         f"of size {n} (expected start + len <= {n})")
    return x.with_dim(a.axis, a.len)


def _ref_narrow(ctx, x):
    a = ctx.attrs
    _infer_narrow([run_shape(ctx, x)], a)       # dynamic dims were unchecked until now
    index = [slice(None)] * x.ndim
    index[a.axis] = slice(a.start, a.start + a.len)
    return x[tuple(index)].copy()


def _narrow_samples(rng):
    x = _arange(3, 7)
    return [
        Sample((x,), NarrowAttrs(1, 2, 3), expect=x[:, 2:5]),
        Sample((x,), NarrowAttrs(0, 0, 3), tags=("full",)),
        Sample((x,), NarrowAttrs(1, 7, 0), tags=("empty",)),
        Sample((x,), NarrowAttrs(1, 6, 1), tags=("size-1", "prime-length")),
        Sample((rng.standard_normal((4, 2)),), NarrowAttrs(0, 1, 2), tags=("f64",)),
        Sample((np.arange(5, dtype=np.int32),), NarrowAttrs(0, 1, 3), tags=("int",)),
    ]


register(OpDef(
    kind="Narrow", family="movement", attrs=NarrowAttrs, payload="struct", arity=1,
    infer=_infer_narrow, check=lambda s, a, o: _infer_narrow(s, a), reference=_ref_narrow,
    doc="Keeps the contiguous range `[start, start + len)` of `axis`: "
        "`x[..., start:start+len, ...]`. The other axes are unchanged.",
    constraints=("C1: axis < rank.", "C2: start + len <= dims[axis]."),
    samples=_narrow_samples, dtypes=ALL_DTYPES,
    notes="RLX never checks start + len against the dim; here it is a verifier error.",
))


@dataclass(frozen=True)
class SliceAttrs:
    axis: int = attr(USIZE, doc="the axis to index")
    start: int = attr(USIZE, doc="absolute index of output element 0")
    len: int = attr(USIZE, doc="number of output elements")
    step: int = attr(INT, doc="stride between reads; negative walks backwards; never 0")


def _infer_slice(shapes, a):
    x = shapes[0]
    check_axis(a.axis, x.rank, "C1")
    want(a.step != 0, "(C2) step must not be 0")
    n = x.dims[a.axis]
    if a.len and not isinstance(n, Dyn):
        last = a.start + (a.len - 1) * a.step
        want(a.start < n and 0 <= last < n,
             f"(C3) slice reads indices {a.start}, {a.start + a.step}, ..., {last} "
             f"(start {a.start}, len {a.len}, step {a.step}), out of range for axis {a.axis} "
             f"of size {n} (expected all in 0..{n - 1})")
    return x.with_dim(a.axis, a.len)


def _ref_slice(ctx, x):
    a = ctx.attrs
    _infer_slice([run_shape(ctx, x)], a)
    picks = a.start + a.step * np.arange(a.len)      # out[j] reads x[start + j*step]
    return np.take(x, picks.astype(np.int64), axis=a.axis)


def _slice_samples(rng):
    x = _arange(2, 7)
    return [
        Sample((x,), SliceAttrs(1, 6, 7, -1), tags=("reverse",), expect=x[:, ::-1]),
        Sample((x,), SliceAttrs(1, 1, 3, 2), tags=("prime-length",), expect=x[:, 1::2]),
        Sample((x,), SliceAttrs(1, 5, 2, -3), tags=("negative-step",), expect=x[:, 5::-3]),
        Sample((x,), SliceAttrs(0, 1, 1, 5), tags=("size-1",)),
        Sample((x,), SliceAttrs(1, 0, 0, 1), tags=("empty",)),
        Sample((np.arange(5, dtype=np.int32),), SliceAttrs(0, 4, 3, -2), tags=("int",)),
        Sample((rng.standard_normal((4,)),), SliceAttrs(0, 0, 2, 3), tags=("f64",)),
    ]


register(OpDef(
    kind="Slice", family="movement", attrs=SliceAttrs, payload="struct", arity=1,
    infer=_infer_slice, check=lambda s, a, o: _infer_slice(s, a), reference=_ref_slice,
    doc="Strided slice of one axis: output element `j` (for `j` in `0..len`) reads input "
        "index `start + j*step`. `start` is an absolute index (no Python-style negative "
        "start) and `step` may be negative, so `x[::-1]` on a dim of size n is `start=n-1, "
        "len=n, step=-1` and `x[1::2]` is `start=1, len=ceil((n-1)/2), step=2`.",
    constraints=("C1: axis < rank.", "C2: step != 0.",
                 ("C3: when len > 0, every index read (start and start + (len-1)*step) lies "
                 "in 0..dims[axis]-1; nothing is clamped.")),
    samples=_slice_samples, dtypes=ALL_DTYPES,
    notes="RLX has no shape rule for Slice (the declared shape is trusted); here the shape "
          "is inferred (axis dim := len) and checked.",
))


# ── Concat ────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ConcatAttrs:
    axis: int = attr(USIZE, doc="the axis the inputs are joined along")


def _infer_concat(shapes, a):
    want(len(shapes) >= 1, "(C1) Concat needs at least one input")
    base = shapes[0]
    want(base.rank > 0, "(C2) Concat inputs must have rank >= 1, input 0 is 0-d")
    check_axis(a.axis, base.rank, "C2")
    total = 0
    for i, s in enumerate(shapes):
        want(s.dtype == base.dtype, f"(C3) Concat input {i} is {s.dtype}, input 0 is "
                                    f"{base.dtype}")
        want(s.rank == base.rank, f"(C4) Concat input {i} has rank {s.rank}, input 0 has "
                                  f"rank {base.rank}")
        for d, (p, q) in enumerate(zip(s.dims, base.dims)):
            want(d == a.axis or same_dim(p, q),
                 f"(C4) Concat input {i} has shape {s.dims_text()}, input 0 has "
                 f"{base.dims_text()}: dim {d} differs and only axis {a.axis} may")
        n = s.dims[a.axis]
        total = None if total is None or isinstance(n, Dyn) else total + n
    if total is None:
        return None     # a dynamic dim on the concat axis: the declared shape decides
    return base.with_dim(a.axis, total)


def _concat_samples(rng):
    a, b = _arange(2, 3), _arange(2, 2) + 10
    return [
        Sample((a, b), ConcatAttrs(1), expect=np.concatenate([a, b], 1)),
        Sample((a, a, a), ConcatAttrs(0), tags=("variadic",)),
        Sample((a,), ConcatAttrs(0), tags=("single",)),
        Sample((a, np.zeros((2, 0), _F), b), ConcatAttrs(1), tags=("empty",)),
        Sample((np.arange(3, dtype=np.int32), np.arange(4, dtype=np.int32)), ConcatAttrs(0),
               tags=("int", "prime-length")),
        Sample((rng.standard_normal((1, 2)), rng.standard_normal((1, 2))), ConcatAttrs(0),
               tags=("f64", "size-1")),
    ]


register(OpDef(
    kind="Concat", family="movement", attrs=ConcatAttrs, payload="struct", arity=None,
    min_arity=1, infer=_infer_concat, check=lambda s, a, o: _infer_concat(s, a),
    reference=lambda ctx, *xs: np.concatenate(xs, axis=ctx.attrs.axis),
    doc="Joins the inputs end to end along `axis` (`np.concatenate`). Variadic: one or more "
        "inputs of the same rank and dtype whose dims agree except on `axis`; the output's "
        "`axis` dim is the sum of theirs.",
    constraints=("C1: at least one input.", "C2: rank >= 1 and axis < rank.",
                 "C3: every input has input 0's dtype.",
                 "C4: every input has input 0's rank and dims, except on `axis`."),
    samples=_concat_samples, dtypes=ALL_DTYPES,
    notes="RLX clamps an out-of-range axis to rank-1 and does not compare the non-axis dims; "
          "here both are verifier errors.",
))


# ── Expand ────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ExpandAttrs:
    target_shape: tuple = attr(ListOf(INT), doc="dims to broadcast to (a 1 keeps the "
                                                "input's dim)")


def _infer_expand(shapes, a):
    x = shapes[0]
    for d in a.target_shape:
        want(d >= 0, f"(C1) target_shape {list(a.target_shape)} has a negative dim {d}")
    try:
        return x.with_dims(broadcast_dims(x.dims, tuple(a.target_shape)))
    except ValueError as e:
        raise OpError(f"(C2) cannot expand {x.dims_text()} to {list(a.target_shape)}: {e}") \
            from None


def _ref_expand(ctx, x):
    out = np.broadcast_shapes(x.shape, tuple(ctx.attrs.target_shape))
    return np.broadcast_to(x, out).copy()


def _expand_samples(rng):
    col = _arange(3, 1)
    return [
        Sample((col,), ExpandAttrs((3, 4)), tags=("broadcast",), expect=np.tile(col, (1, 4))),
        Sample((col,), ExpandAttrs((2, 1, 1)), tags=("broadcast", "size-1", "bidirectional")),
        Sample((_F(7.0),), ExpandAttrs((2, 3)), tags=("0-d", "broadcast")),
        Sample((_arange(4),), ExpandAttrs((0, 4)), tags=("empty", "broadcast")),
        Sample((np.array([1, 2], np.int32),), ExpandAttrs((3, 2)), tags=("int", "broadcast")),
        Sample((rng.standard_normal((1, 2)),), ExpandAttrs((2,)), tags=("f64", "broadcast")),
    ]


register(OpDef(
    kind="Expand", family="movement", attrs=ExpandAttrs, payload="struct", arity=1,
    caps=Caps.CONST_FOLDABLE, infer=_infer_expand, check=lambda s, a, o: _infer_expand(s, a),
    reference=_ref_expand,
    doc="Broadcasts the input against `target_shape` with NumPy's two-way rule (ONNX "
        "Expand): dims align from the right, a 1 on either side stretches to the other, and "
        "the output rank is the larger rank. So a target dim of 1 keeps the input's dim.",
    constraints=("C1: every target dim is >= 0.",
                 "C2: the input dims and target_shape broadcast."),
    samples=_expand_samples, dtypes=ALL_DTYPES,
))


# ── Reverse ───────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ReverseAttrs:
    axes: tuple = attr(ListOf(USIZE), doc="the axes to flip")


def _check_reverse(shapes, a, out=None):
    for ax in a.axes:
        check_axis(ax, shapes[0].rank, "C1")


def _reverse_samples(rng):
    x = _arange(2, 3)
    return [
        Sample((x,), ReverseAttrs((1,)), expect=x[:, ::-1]),
        Sample((x,), ReverseAttrs((0, 1)), tags=("all-axes",)),
        Sample((x,), ReverseAttrs((1, 1)), tags=("duplicate-axis",), expect=x[:, ::-1]),
        Sample((x,), ReverseAttrs(()), tags=("identity",)),
        Sample((_F(1.5),), ReverseAttrs(()), tags=("0-d",)),
        Sample((np.zeros((0, 2), _F),), ReverseAttrs((0,)), tags=("empty",)),
        Sample((np.arange(7, dtype=np.int8),), ReverseAttrs((0,)), tags=("int", "prime-length")),
    ]


register(OpDef(
    kind="Reverse", family="movement", attrs=ReverseAttrs, payload="struct", arity=1,
    infer=lambda s, a: s[0], check=_check_reverse,
    reference=lambda ctx, x: np.flip(x, axis=tuple(sorted(set(ctx.attrs.axes)))).copy(),
    doc="Flips the element order along each listed axis: on a flipped axis of size d, output "
        "index i reads input index d-1-i. Other axes pass through; an axis listed twice "
        "flips once; an empty list is the identity.",
    constraints=("C1: every listed axis is < rank.",),
    samples=_reverse_samples, dtypes=ALL_DTYPES,
    notes="RLX's CPU kernel silently ignores axes >= rank; here they are verifier errors.",
))


from . import _movement_fill  # noqa: E402,F401  (registers Pad, Tile, Trilu, ResizeNearest2x)
