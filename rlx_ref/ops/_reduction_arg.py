"""Index-valued reductions: ArgMax, ArgMin, TopK (part of the reduction family).

RLX returns indices as values of the input's float dtype ("f32-encoded"), so an index
must be exactly representable there: checked statically where the dims are known.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact
from ..ir.dtype import DType, int_range
from ..ir.shape import Dyn, Shape
from .codec import BOOL, USIZE, attr
from .opdef import Caps, OpDef, OpError, Sample, compute_dtype, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
# Largest n such that every integer 0..n is exact in the float dtype (2^mantissa bits).
_EXACT = {DType.F16: 2**11, DType.BF16: 2**8, DType.F32: 2**24, DType.F64: 2**53}


def _max_index(dtype: DType) -> int:
    return _EXACT[dtype] if dtype.is_float else int_range(dtype)[1]


def _check_index_dtype(kind: str, dtype: DType, length, cid: str) -> None:
    """Indices 0..length-1 must be exact values of ``dtype``."""
    want(dtype.is_float or dtype.is_int,
         f"({cid}) {kind} is defined on float and integer tensors, got {dtype}")
    if not isinstance(length, Dyn) and length > 0:
        want(length - 1 <= _max_index(dtype),
             f"({cid}) {kind} index {length - 1} is not exactly representable in {dtype} "
             f"(its largest exact integer is {_max_index(dtype)}); Cast the input to f32")


# ── ArgMax, ArgMin ────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ArgAttrs:
    axis: int = attr(USIZE, doc="the axis searched (absolute, 0-based)")
    keep_dim: bool = attr(BOOL, doc="keep the searched axis as size 1")


def _infer_arg(kind):
    def infer(shapes, a):
        x = shapes[0]
        want(a.axis < x.rank, f"(C1) axis {a.axis} is out of range for rank {x.rank} "
                              f"(input {x}; {kind} needs rank >= 1)")
        dims = [1 if i == a.axis else d for i, d in enumerate(x.dims)
                if a.keep_dim or i != a.axis]
        return Shape(dims, x.dtype)
    return infer


def _check_arg(kind):
    def check(shapes, a, out):
        x = shapes[0]
        if a.axis >= x.rank:
            return      # C1 is reported by the shape rule
        n = x.dims[a.axis]
        _check_index_dtype(kind, x.dtype, n, "C2")
        others = [d for i, d in enumerate(x.dims) if i != a.axis]
        nonempty = all(not isinstance(d, Dyn) and d > 0 for d in others)
        want(n != 0 or not nonempty,
             f"(C3) {kind} over an empty axis ({a.axis} of {x.dims_text()}) has no answer")
    return check


def _arg_reference(largest: bool):
    kind = "ArgMax" if largest else "ArgMin"

    def ref(ctx, x):
        ax, keep = ctx.attrs.axis, ctx.attrs.keep_dim
        if x.shape[ax] == 0:
            want(x.size == 0 and np.prod(ctx.out_dims) == 0,
                 f"{kind} over an empty axis ({ax} of shape {list(x.shape)}) has no answer")
            return np.zeros(ctx.out_dims, ctx.out_np)
        y = compute_dtype(x)
        # RLX's CPU scan: best = element 0, then the first strictly larger (smaller) one.
        # NaN never compares larger, so a NaN after element 0 is skipped, and a NaN AT
        # element 0 is never beaten: the answer is 0. Otherwise that is the first position
        # of the NaN-ignoring extreme (argmax of all-False, all NaN, is 0 too).
        best = (np.fmax if largest else np.fmin).reduce(y, axis=ax, keepdims=True)
        first = np.argmax(y == best, axis=ax, keepdims=keep)
        if y.dtype.kind == "f":
            lead_nan = np.isnan(np.take(y, [0], axis=ax))
            first = np.where(lead_nan if keep else np.squeeze(lead_nan, ax), 0, first)
        return first.astype(ctx.out_np)
    return ref


def _arg_samples(largest: bool):
    def samples(rng):
        x = rng.standard_normal((3, 5, 2)).astype(np.float32)
        ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)
        nan = np.array([[np.nan, 1, 5, np.nan], [np.nan] * 4, [-np.inf, np.nan, -np.inf, 0]],
                       np.float32)
        mid_nan = np.array([[2, np.nan, 7, 7], [3, np.nan, -1, -1]], np.float32)
        e_mid = [2, 0] if largest else [0, 2]
        a = ArgAttrs
        if largest:
            e_ties, e_nan, e_signed = [1, 0], [0, 0, 3], 0
        else:
            e_ties, e_nan, e_signed = [3, 0], [0, 0, 0], 0
        return [
            Sample((ties,), a(1, False), tags=("ties", "hand"),
                   expect=np.array(e_ties, np.float32)),
            Sample((nan,), a(1, False), tags=("nan", "inf", "hand"),
                   expect=np.array(e_nan, np.float32)),
            Sample((mid_nan,), a(1, True), tags=("nan", "keep_dim", "hand"),
                   expect=np.array(e_mid, np.float32).reshape(2, 1)),
            Sample((np.array([-0.0, 0.0], np.float32),), a(0, False), tags=("±0", "0-d"),
                   expect=np.float32(e_signed)),
            Sample((x,), a(1, False), tags=("middle-axis", "prime-length")),
            Sample((x,), a(0, True), tags=("keep_dim", "odd")),
            Sample((x,), a(2, False), tags=("last-axis",)),
            Sample((np.array([[4.0]], np.float32),), a(0, False), tags=("size-1",),
                   expect=np.zeros(1, np.float32)),
            Sample((np.zeros((0, 3), np.float32),), a(1, False), tags=("empty",)),
            Sample((np.array([[3, -7, 3], [1, 9, 9]], np.int32),), a(1, True), tags=("int",)),
            Sample((rng.standard_normal((3, 4)),), a(1, False), tags=("f64",)),
            Sample((rng.standard_normal((3, 4)).astype(np.float16),), a(0, False),
                   tags=("f16",)),
        ]
    return samples


for _kind, _largest in (("ArgMax", True), ("ArgMin", False)):
    _word = "largest" if _largest else "smallest"
    register(OpDef(
        kind=_kind, family="reduction", attrs=ArgAttrs, payload="struct", arity=1,
        caps=Caps.NONE, infer=_infer_arg(_kind), check=_check_arg(_kind),
        reference=_arg_reference(_largest),
        doc=f"The index of the {_word} element along `axis` (absolute). The axis is dropped "
            f"(or kept as size 1 with `keep_dim`). The index is returned as a value of the "
            f"input's dtype (RLX's f32-encoded indices). Ties give the lowest index (-0 and "
            f"+0 tie). The search starts at element 0 and moves only to a strictly "
            f"{_word} element, so a NaN after element 0 is skipped and a NaN at element 0 "
            f"is never beaten: the answer is then 0 (as for an all-NaN slice).",
        constraints=("C1: axis < rank (the input has rank >= 1).",
                     ("C2: the input is float or integer and every index along the axis "
                      "is exact in its dtype (f16: axis length <= 2049, bf16: <= 257)."),
                     "C3: the axis is non-empty unless the output is empty."),
        samples=_arg_samples(_largest), dtypes=FLOATS + (DType.I32,), accuracy=exact(),
        notes="Follows RLX's CPU kernel (rlx-cpu exec_arg_reduce / execute_argreduce_f32: "
              "best = element 0, strict >/<), NaN at element 0 included.",
    ))


# ── TopK ──────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class TopKAttrs:
    k: int = attr(USIZE, doc="how many indices to return per row")


def _check_topk(shapes, a, out):
    x = shapes[0]
    want(x.rank >= 1, f"(C1) TopK needs a tensor of rank >= 1, got {x}")
    n = x.dims[-1]
    want(isinstance(n, Dyn) or a.k <= n,
         f"(C2) TopK k={a.k} exceeds the last axis size {n} of input {x.dims_text()}")
    expect = x.dims[:-1] + (a.k,)
    want(out.dims == expect, f"(C3) TopK(k={a.k}) of {x.dims_text()} gives "
                             f"{Shape(expect, x.dtype).dims_text()}, declared {out.dims_text()}")
    want(out.dtype in (x.dtype, DType.I64),
         f"(C4) TopK returns indices in the input's dtype {x.dtype} (f32-encoded) or i64, "
         f"declared {out.dtype}")
    _check_index_dtype("TopK", x.dtype, n, "C5")


def _ref_topk(ctx, x):
    k, n = ctx.attrs.k, x.shape[-1]
    if k > n:
        raise OpError(f"TopK k={k} exceeds the last axis size {n}")
    y = compute_dtype(x)
    # Sort ascending by a key that reverses the order: -x for floats (NaN sorts last, so
    # it ranks below -inf), ~x = -x-1 for integers (no overflow at the type's minimum).
    key = -y if y.dtype.kind == "f" else ~y
    order = np.argsort(key, axis=-1, kind="stable")   # stable: ties keep the lower index
    return order[..., :k].astype(ctx.out_np)


def _topk_samples(rng):
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    v = np.array([[1, 5, 3, 5, 2], [0, -1, -0.0, 4, 4]], np.float32)
    nan = np.array([np.nan, 1, -np.inf, np.nan, 2], np.float32)

    def s(arr, k, dtype=None, **kw):
        a = np.asarray(arr)
        dt = dtype or DType.of(a)
        return Sample((a,), TopKAttrs(k), out=Shape(a.shape[:-1] + (k,), dt), **kw)

    return [
        s(v, 3, tags=("ties", "±0", "hand"),
          expect=np.array([[1, 3, 2], [3, 4, 0]], np.float32)),
        s(nan, 5, tags=("nan", "inf", "hand"), expect=np.array([4, 1, 2, 0, 3], np.float32)),
        s(x, 3, tags=("prime-length", "odd")),
        s(x, 7, tags=("k=n",)),
        s(v, 2, DType.I64, tags=("i64-indices",), expect=np.array([[1, 3], [3, 4]], np.int64)),
        s(np.array([3.5], np.float32), 1, tags=("size-1",), expect=np.zeros(1, np.float32)),
        s(x, 0, tags=("empty", "k=0")),
        s(np.zeros((0, 4), np.float32), 2, tags=("empty",)),
        s(np.array([[-128, 127, 0, -128]], np.int8), 4, tags=("int",),
          expect=np.array([[1, 2, 0, 3]], np.int8)),
        s(rng.standard_normal((2, 5)), 2, tags=("f64",)),
        s(rng.standard_normal(6).astype(np.float16), 3, tags=("f16",)),
    ]


register(OpDef(
    kind="TopK", family="reduction", attrs=TopKAttrs, payload="struct", arity=1,
    caps=Caps.REDUCTION, check=_check_topk, reference=_ref_topk,
    doc="The indices of the `k` largest elements along the last axis, largest first: output "
        "`[..., k]`. There is no values output (recover the values with GatherElements). "
        "Ties keep the lower index first (a stable descending sort, as "
        "`torch.topk(largest=True, sorted=True)`); -0 and +0 tie; NaN ranks below every "
        "number, -inf included. Indices are values of the input's dtype (RLX's f32-encoded "
        "indices) unless the node is declared i64.",
    constraints=("C1: the input has rank >= 1.",
                 "C2: k <= the last axis size.",
                 "C3: the declared dims are the input's with the last replaced by k.",
                 "C4: the declared dtype is the input's or i64.",
                 ("C5: the input is float or integer and every index along the last axis "
                  "is exact in its dtype.")),
    samples=_topk_samples, dtypes=FLOATS + (DType.I32,), accuracy=exact(),
    notes="No shape rule, as RLX: the declared shape is authoritative because the index "
          "dtype (input dtype or i64) is the node's choice; C3/C4 check it. RLX leaves "
          "k > axis length unspecified; rlx_ref rejects it. Kept apart from RLX's CPU "
          "kernel (rlx-cpu thunk.rs Thunk::TopK) for a known RLX defect: it repeats an "
          "ArgMax scan (start at element 0, strict >) and masks each pick by writing -inf "
          "over it, so once only -inf is left it returns index 0 again ([1, -inf], k=2 "
          "gives [0, 0]) and a NaN after element 0 is never returned. rlx_ref returns k "
          "distinct indices with NaN ranked below every number, so on a row whose element 0 "
          "is NaN, TopK(k=1) differs from ArgMax (which follows RLX's scan and gives 0).",
))
