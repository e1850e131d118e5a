"""Reduction family: Reduce, Softmax, Cumsum, CumProd, CumMax (+ ArgMax, ArgMin, TopK).

16-bit floats are reduced in f32 and rounded once (f64 in float64 mode, where every
float arrives as f64). Max/Min follow RLX's ``f32::max``/``min``: a NaN never wins.
ArgMax, ArgMin and TopK live in ``_reduction_arg.py``, imported at the bottom.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, per_op, reduction
from ..ir.dtype import DType
from ..ir.shape import Shape
from .codec import BOOL, I32, USIZE, Enum, ListOf, attr
from .elementwise import zero_sign_of_extreme
from .opdef import Caps, OpDef, Sample, compute_dtype, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
REDUCE_OPS = ("Sum", "Mean", "Max", "Min", "Prod")
REDUCE_ENUM = Enum("ReduceOp", units=REDUCE_OPS)


def lowest(dtype: np.dtype):
    """The identity of a running max: -inf, or the smallest integer."""
    return -np.inf if dtype.kind in "fc" else np.iinfo(dtype).min


def highest(dtype: np.dtype):
    """The identity of a running min: +inf, or the largest integer."""
    return np.inf if dtype.kind in "fc" else np.iinfo(dtype).max


def signed_axis(axis: int, rank: int, kind: str) -> int:
    """An i32 axis field (negative counts from the end) as 0..rank-1; OpError otherwise."""
    want(rank >= 1, f"(C1) {kind} needs a tensor of rank >= 1, got a 0-d tensor")
    want(-rank <= axis < rank, f"(C1) axis {axis} is out of range for rank {rank} "
                               f"(expected {-rank}..{rank - 1})")
    return axis + rank if axis < 0 else axis


# ── Reduce ────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ReduceAttrs:
    op: str = attr(REDUCE_ENUM, doc="Sum, Mean, Max, Min or Prod")
    axes: tuple = attr(ListOf(USIZE), doc="the axes reduced over (any order, duplicates ok)")
    keep_dim: bool = attr(BOOL, doc="keep each reduced axis as size 1")


def _infer_reduce(shapes, a):
    x = shapes[0]
    for ax in a.axes:
        want(ax < x.rank, f"(C2) axis {ax} is out of range for rank {x.rank} (input {x})")
    if a.keep_dim:
        return Shape([1 if i in a.axes else d for i, d in enumerate(x.dims)], x.dtype)
    return Shape([d for i, d in enumerate(x.dims) if i not in a.axes], x.dtype)


def _check_reduce(shapes, a, out):
    want(a.op in REDUCE_OPS, f"(C1) unknown reduce op {a.op!r}; expected one of "
                             f"{', '.join(REDUCE_OPS)}")
    dt = shapes[0].dtype
    want(not dt.is_bool, "(C3) Reduce is not defined on bool tensors; Cast to an integer")
    if a.op == "Mean":
        want(not dt.is_int, f"(C3) Reduce Mean is defined on float and complex tensors, got "
                            f"{dt}; Cast to a float first")
    if a.op in ("Max", "Min"):
        want(not dt.is_complex, f"(C3) Reduce {a.op} is not defined on complex tensors")


def _ref_reduce(ctx, x):
    a = ctx.attrs
    axes = tuple(sorted(set(a.axes)))
    y = compute_dtype(x)
    keep = a.keep_dim
    with np.errstate(all="ignore"):
        if a.op == "Sum":
            out = np.sum(y, axis=axes, keepdims=keep, dtype=y.dtype)  # integers wrap
        elif a.op == "Mean":
            count = math.prod(x.shape[i] for i in axes)
            out = np.sum(y, axis=axes, keepdims=keep, dtype=y.dtype) / y.dtype.type(count)
        elif a.op == "Prod":
            out = np.prod(y, axis=axes, keepdims=keep, dtype=y.dtype)
        elif a.op == "Max":
            # fmax skips NaN; starting from -inf makes an all-NaN or empty slice -inf.
            out = np.fmax.reduce(y, axis=axes, keepdims=keep, initial=lowest(y.dtype))
            out = zero_sign_of_extreme(out, y, axes, keep, largest=True)
        else:
            out = np.fmin.reduce(y, axis=axes, keepdims=keep, initial=highest(y.dtype))
            out = zero_sign_of_extreme(out, y, axes, keep, largest=False)
    return np.asarray(out).astype(ctx.out_np)


def _reduce_samples(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    hand = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    nan = np.array([[np.nan, 1, -2], [np.nan, np.nan, np.nan]], np.float32)
    hand_out = {"Sum": [6, 15], "Mean": [2, 5], "Max": [3, 6], "Min": [1, 4],
                "Prod": [6, 120]}
    nan_max = {"Max": [1, -np.inf], "Min": [-2, np.inf]}
    empty_out = {"Sum": 0, "Mean": np.nan, "Max": -np.inf, "Min": np.inf, "Prod": 1}
    out = []
    for op in REDUCE_OPS:
        r = lambda axes, keep=False, op=op: ReduceAttrs(op, tuple(axes), keep)  # noqa: E731
        out += [
            Sample((hand,), r([1]), tags=("hand",), expect=np.array(hand_out[op], np.float32)),
            Sample((x,), r([1]), tags=("middle-axis",)),
            Sample((x,), r([0, 2], True), tags=("keep_dim", "non-contiguous")),
            Sample((x,), r([2, 1, 2]), tags=("duplicate-axes", "unsorted")),
            Sample((x,), r([0, 1, 2]), tags=("all-axes", "0-d")),
            Sample((x,), r([]), tags=("no-axes",)),
            Sample((np.float32(2.5),), r([]), tags=("0-d",), expect=np.float32(2.5)),
            Sample((rng.standard_normal((7, 1)).astype(np.float32),), r([0, 1], True),
                   tags=("prime-length", "size-1")),
            Sample((np.zeros((2, 0), np.float32),), r([1]), tags=("empty",),
                   expect=np.full(2, empty_out[op], np.float32)),
            Sample((np.zeros((0, 3), np.float32),), r([1]), tags=("empty",)),
            Sample((rng.standard_normal((3, 5)),), r([1]), tags=("f64",)),
            Sample((rng.standard_normal((3, 5)).astype(np.float16),), r([0]), tags=("f16",)),
        ]
        if op in nan_max:
            out.append(Sample((nan,), r([1]), tags=("nan",),
                              expect=np.array(nan_max[op], np.float32)))
        if op != "Mean":
            out.append(Sample((np.array([[3, -7, 2], [100, 100, 100]], np.int32),), r([1]),
                              tags=("int",)))
    return out


register(OpDef(
    kind="Reduce", family="reduction", attrs=ReduceAttrs, payload="struct", arity=1,
    caps=Caps.REDUCTION, infer=_infer_reduce, check=_check_reduce, reference=_ref_reduce,
    doc="Reduces the input over `axes` with `op`: Sum, Mean (`sum / count`), Max, Min or "
        "Prod. Each listed axis is dropped (or kept as size 1 with `keep_dim`); axes may be "
        "listed in any order and more than once; an empty list leaves the input unchanged; "
        "reducing every axis gives a 0-d tensor. Identities of an empty slice: Sum 0, Prod 1, "
        "Max -inf, Min +inf, Mean 0/0 = NaN. Max and Min ignore NaN (`f32::max` semantics): "
        "an all-NaN slice gives -inf (Max) or +inf (Min). Integers wrap; f16/bf16 accumulate "
        "in f32.",
    constraints=("C1: `op` is Sum, Mean, Max, Min or Prod.",
                 "C2: every axis is below the input's rank.",
                 ("C3: the input is numeric (not bool); Mean needs float or complex, Max "
                  "and Min need a real (float or integer) dtype.")),
    samples=_reduce_samples, dtypes=FLOATS + (DType.I32, DType.I64),
    accuracy=per_op({   # K = the reduced element count
        "Sum": reduction(2, lambda a, s: math.prod(s[0].dims[i] for i in set(a.axes))),
        "Mean": reduction(2, lambda a, s: math.prod(s[0].dims[i] for i in set(a.axes)),
                          mean=True),
        "Prod": reduction(2, lambda a, s: math.prod(s[0].dims[i] for i in set(a.axes)),
                          "value"),
        "Max": exact(), "Min": exact()}),
    notes="RLX's shape rule silently ignores axes beyond the rank; rlx_ref rejects them "
          "(C2). RLX's CPU accumulates f32 sequentially (numpy sums pairwise, slightly more "
          "accurate) and needs the axes to form a contiguous range; Mean of integers reads "
          "garbage there, so rlx_ref rejects it.",
))


# ── Softmax ───────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class SoftmaxAttrs:
    axis: int = attr(I32, doc="the axis normalised over (negative counts from the end)")


def _infer_softmax(shapes, a):
    signed_axis(a.axis, shapes[0].rank, "Softmax")
    return shapes[0]


def _ref_softmax(ctx, x):
    ax = signed_axis(ctx.attrs.axis, x.ndim, "Softmax")
    y = compute_dtype(x)
    with np.errstate(all="ignore"):
        # Subtracting the slice max keeps exp() in range; `initial` lets empty slices pass.
        shifted = y - np.max(y, axis=ax, keepdims=True, initial=-np.inf)
        e = np.exp(shifted)
        return (e / np.sum(e, axis=ax, keepdims=True)).astype(ctx.out_np)


def _softmax_samples(rng):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32) * 3
    sm = SoftmaxAttrs
    return [
        Sample((np.array([0, 0, np.log(2)], np.float32),), sm(-1), tags=("hand",)),
        Sample((x,), sm(-1), tags=("last-axis", "prime-length")),
        Sample((x,), sm(1), tags=("middle-axis", "odd")),
        Sample((x,), sm(-3), tags=("negative-index",)),
        Sample((np.array([[1000, 1000], [-1000, 0]], np.float32),), sm(1), tags=("large",)),
        Sample((np.array([[-np.inf, 0, -np.inf], [-np.inf] * 3, [np.nan, 0, 1]], np.float32),),
               sm(-1), tags=("inf", "nan")),
        Sample((rng.standard_normal((4, 1)).astype(np.float32),), sm(1), tags=("size-1",),
               expect=np.ones((4, 1), np.float32)),
        Sample((np.zeros((0, 3), np.float32),), sm(1), tags=("empty",)),
        Sample((np.zeros((3, 0), np.float32),), sm(1), tags=("empty",)),
        Sample((rng.standard_normal((2, 3)),), sm(0), tags=("f64",)),
        Sample((rng.standard_normal(6).astype(np.float16),), sm(0), tags=("f16",)),
    ]


register(OpDef(
    kind="Softmax", family="reduction", attrs=SoftmaxAttrs, payload="struct", arity=1,
    caps=Caps.REDUCTION, infer=_infer_softmax, reference=_ref_softmax,
    check=lambda s, a, o: want(s[0].dtype.is_float,
                               f"(C2) Softmax is defined on float tensors, got {s[0].dtype}"),
    doc="`exp(x - m) / Σ exp(x - m)` along `axis`, where m is the slice's max (the usual "
        "overflow guard; it does not change the result). A negative axis counts from the "
        "end. Shape and dtype are unchanged. A slice that is all -inf, or holds +inf or "
        "NaN, gives NaN throughout. f16/bf16 are computed in f32.",
    constraints=("C1: the input has rank >= 1 and -rank <= axis < rank.",
                 "C2: the input is float."),
    samples=_softmax_samples, dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[a.axis], "row", axes=lambda a, s: (a.axis,)),
    notes="RLX's CPU computes f32 only, with a polynomial exp (a few ulp from libm). Kept "
          "apart from RLX's x86 AVX2 exp (avx2_exp8) for a defect RLX documents as a known "
          "gap beside its portable exp_poly: it clamps its input to [-87.3, 88.7] with "
          "max/min, which swallow NaN, so an all -inf row (x - max = NaN) comes out "
          "uniform and a NaN logit gets ~0 weight. rlx_ref computes exact exp, as RLX's "
          "portable and accurate (RLX_VMATH_ACCURATE) paths do: NaN stays NaN, -inf gives 0.",
))


# ── Cumsum, CumProd, CumMax ───────────────────────────────────────────────

@dataclass(frozen=True)
class CumAttrs:
    axis: int = attr(I32, doc="the scanned axis (negative counts from the end)")
    exclusive: bool = attr(BOOL, doc="out[j] combines x[0..j) instead of x[0..=j]")


def _running(kind: str, y: np.ndarray) -> np.ndarray:
    """The inclusive scan of ``y`` along its last axis."""
    if kind == "Cumsum":
        return np.add.accumulate(y, axis=-1, dtype=y.dtype)
    if kind == "CumProd":
        return np.multiply.accumulate(y, axis=-1, dtype=y.dtype)
    if y.dtype.kind == "f":
        y = np.where(np.isnan(y), -np.inf, y)   # f32::max never picks a NaN
    return np.maximum.accumulate(y, axis=-1)


_IDENTITY = {"Cumsum": lambda dt: 0, "CumProd": lambda dt: 1, "CumMax": lowest}


def _scan_reference(kind: str):
    def ref(ctx, x):
        ax = signed_axis(ctx.attrs.axis, x.ndim, kind)
        y = np.moveaxis(compute_dtype(x), ax, -1)   # scan the last axis, move it back after
        with np.errstate(all="ignore"):
            out = _running(kind, y)
        if ctx.attrs.exclusive and y.shape[-1] > 0:
            # Shift right by one: out[j] = scan(x[0..j)), out[0] = the identity.
            first = np.full(y.shape[:-1] + (1,), _IDENTITY[kind](y.dtype), y.dtype)
            out = np.concatenate([first, out[..., :-1]], axis=-1)
        return np.moveaxis(out, -1, ax).astype(ctx.out_np)
    return ref


def _infer_scan(kind):
    def infer(shapes, a):
        signed_axis(a.axis, shapes[0].rank, kind)
        return shapes[0]
    return infer


def _check_scan(kind):
    def check(shapes, a, out):
        dt = shapes[0].dtype
        want(dt.is_float or dt.is_int, f"(C2) {kind} is defined on float and integer "
                                       f"tensors, got {dt}")
    return check


def _scan_samples(kind: str, hand: dict):
    def samples(rng):
        x = rng.standard_normal((2, 3, 5)).astype(np.float32)
        v = np.array([1, 2, 3, 4], np.float32)
        return [
            Sample((v,), CumAttrs(-1, False), tags=("hand",),
                   expect=np.array(hand["inc"], np.float32)),
            Sample((v,), CumAttrs(0, True), tags=("hand", "exclusive"),
                   expect=np.array(hand["exc"], np.float32)),
            Sample((x,), CumAttrs(-1, False), tags=("last-axis", "prime-length")),
            Sample((x,), CumAttrs(1, True), tags=("middle-axis", "exclusive", "odd")),
            Sample((x,), CumAttrs(-3, False), tags=("negative-index",)),
            Sample((np.array([1, np.nan, 3, -np.inf, np.inf], np.float32),),
                   CumAttrs(0, False), tags=("nan", "inf")),
            Sample((np.array([[2.5]], np.float32),), CumAttrs(1, False), tags=("size-1",)),
            Sample((np.zeros((2, 0), np.float32),), CumAttrs(1, True), tags=("empty",)),
            Sample((np.array([5, -3, 7, 2], np.int32),), CumAttrs(0, True), tags=("int",)),
            Sample((rng.standard_normal((3, 4)),), CumAttrs(0, False), tags=("f64",)),
            Sample((rng.standard_normal(7).astype(np.float16),), CumAttrs(0, False),
                   tags=("f16",)),
        ]
    return samples


_SCANS = {
    "Cumsum": ("running sum", "0", {"inc": [1, 3, 6, 10], "exc": [0, 1, 3, 6]}, ""),
    "CumProd": ("running product", "1", {"inc": [1, 2, 6, 24], "exc": [1, 1, 2, 6]}, ""),
    "CumMax": ("running maximum", "-inf (the smallest integer for integer tensors)",
               {"inc": [1, 2, 3, 4], "exc": [-np.inf, 1, 2, 3]},
               (" A NaN never becomes the maximum (`f32::max` semantics), so a leading "
                "NaN gives -inf until a number arrives.")),
}

for _kind, (_what, _ident, _hand, _extra) in _SCANS.items():
    register(OpDef(
        kind=_kind, family="reduction", attrs=CumAttrs, payload="struct", arity=1,
        caps=Caps.NONE, reference=_scan_reference(_kind), check=_check_scan(_kind),
        infer=_infer_scan(_kind),
        doc=f"The {_what} along `axis` (negative counts from the end): inclusive "
            f"`out[j] = x[0] ∘ … ∘ x[j]`; with `exclusive` the scan is shifted by one, "
            f"`out[0] = {_ident}` and `out[j]` combines `x[0..j)`. No reverse flag. Shape "
            f"and dtype are unchanged; integers wrap; f16/bf16 run in f32.{_extra}",
        constraints=("C1: the input has rank >= 1 and -rank <= axis < rank.",
                     "C2: the input is float or integer."),
        samples=_scan_samples(_kind, _hand), dtypes=FLOATS + (DType.I32, DType.I64),
        accuracy={"Cumsum": reduction(2, lambda a, s: s[0].dims[a.axis]),
                  "CumProd": reduction(2, lambda a, s: s[0].dims[a.axis], "value"),
                  "CumMax": exact()}[_kind],
        notes="RLX's CPU scans only the last axis" +
              (" (integer Cumsum in i32/i64, else f32)." if _kind == "Cumsum" else
               " and only f32; RLX has no shape rule for it, rlx_ref infers the input's.") +
              (" NaN-ignoring as RLX: its CumMax lowering (rlx-opt lower_cumulative) is a "
               "masked Reduce Max, and RLX's CPU Reduce Max folds with Rust's f32::max, which "
               "returns the non-NaN operand." if _kind == "CumMax" else ""),
    ))

from . import _reduction_arg  # noqa: E402,F401  (registers ArgMax, ArgMin, TopK)
