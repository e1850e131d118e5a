"""Linear algebra family: MatMul, DotGeneral, DenseSolve, BatchedDenseSolve.

Products run in the operands' dtype (16-bit floats in f32, rounded once at the end);
solves are LU with partial pivoting (LAPACK gesv through numpy), one matrix at a time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape, ShapeError, broadcast_dims
from .codec import USIZE, ListOf, attr
from .opdef import Caps, OpDef, OpError, Sample, compute_dtype, register, want

BLAS = Caps.BLAS | Caps.FUSION_BOUNDARY
FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)


def _agree(a, b) -> bool:
    """Two dims agree: equal, or one is dynamic (then only the run can tell)."""
    return a == b or isinstance(a, Dyn) or isinstance(b, Dyn)


def _same_numeric_dtype(shapes, kind: str, cid: str) -> None:
    a, b = shapes[0].dtype, shapes[1].dtype
    want(a == b, f"({cid}) {kind} operands must share one dtype, got {a} and {b}; "
                 "insert a Cast")
    want(not a.is_bool, f"({cid}) {kind} is not defined on bool tensors")


# ── MatMul ────────────────────────────────────────────────────────────────

def _infer_matmul(shapes, a):
    lhs, rhs = shapes
    want(lhs.rank >= 2 and rhs.rank >= 2,
         f"(C1) matmul requires rank >= 2, got {lhs.rank} and {rhs.rank} (lhs {lhs}, "
         f"rhs {rhs}); reshape a vector to [1, K] or [K, 1]")
    k_lhs, k_rhs = lhs.dims[-1], rhs.dims[-2]
    want(_agree(k_lhs, k_rhs),
         f"(C2) matmul K mismatch: lhs {lhs.dims_text()} has K={k_lhs} (last dim) but rhs "
         f"{rhs.dims_text()} has K={k_rhs} (second-to-last dim)")
    try:
        batch = broadcast_dims(lhs.dims[:-2], rhs.dims[:-2])
    except ShapeError as e:
        raise OpError(f"(C3) matmul batch dims do not broadcast: {e}") from None
    return Shape(batch + (lhs.dims[-2], rhs.dims[-1]), lhs.dtype)


def _ref_matmul(ctx, a, b):
    # np.matmul broadcasts the batch prefix exactly as RLX does for rank >= 2.
    with np.errstate(all="ignore"):    # inf·0 → NaN is the IEEE answer, not a fault
        return np.matmul(compute_dtype(a), compute_dtype(b)).astype(ctx.out_np)


def _matmul_samples(rng):
    def f32(*dims):
        return rng.standard_normal(dims).astype(np.float32)

    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    b = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    special = np.array([[np.inf, 1.0], [np.nan, 0.0]], np.float32)
    return [
        Sample((a, b), None, tags=("hand",), expect=np.array([[4, 5], [10, 11]], np.float32)),
        Sample((f32(5, 7), f32(7, 3)), None, tags=("prime-length", "odd")),
        Sample((f32(2, 1, 2, 3), f32(3, 3, 2)), None, tags=("broadcast",)),
        Sample((f32(2, 3, 4), f32(4, 5)), None, tags=("broadcast", "batch-one-side")),
        Sample((f32(1, 4), f32(4, 1)), None, tags=("size-1",)),
        Sample((np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)), None,
               tags=("empty", "K=0"), expect=np.zeros((2, 3), np.float32)),
        Sample((np.zeros((0, 2), np.float32), f32(2, 3)), None, tags=("empty",)),
        Sample((special, np.eye(2, dtype=np.float32)), None, tags=("nan", "inf")),
        Sample((rng.standard_normal((3, 4)), rng.standard_normal((4, 2))), None, tags=("f64",)),
        Sample((f32(3, 4).astype(np.float16), f32(4, 2).astype(np.float16)), None,
               tags=("f16",)),
        Sample((np.array([[1, -2], [3, 4]], np.int32), np.array([[5], [6]], np.int32)), None,
               tags=("int",), expect=np.array([[-7], [39]], np.int32)),
    ]


register(OpDef(
    kind="MatMul", family="linalg", arity=2, caps=BLAS, input_names=("lhs", "rhs"),
    infer=_infer_matmul, reference=_ref_matmul,
    check=lambda s, a, o: _same_numeric_dtype(s, "MatMul", "C4"),
    doc="Matrix product over the last two dims: `lhs [..., M, K] @ rhs [..., K, N] -> "
        "[..., M, N]`, `out[..., m, n] = Σ_k lhs[..., m, k]·rhs[..., k, n]`. The batch "
        "prefixes broadcast like NumPy (a side without batch dims takes the other's). "
        "Unlike `np.matmul`, rank-1 operands are not promoted. An empty K gives zeros. "
        "Integers wrap; f16/bf16 accumulate in f32.",
    constraints=("C1: both operands have rank >= 2.",
                 "C2: lhs's last dim equals rhs's second-to-last dim (K).",
                 "C3: the batch prefixes broadcast.",
                 "C4: both operands share one numeric dtype (not bool); it is the output's."),
    samples=_matmul_samples, dtypes=FLOATS + (DType.I32, DType.I64),
    accuracy=reduction(2, lambda a, s: s[0].dims[-1]),     # K = the inner dim
    notes="RLX's CPU backend lowers only f32 (sgemm) and f64 (dgemm). RLX's shape rule "
          "takes the lhs dtype without checking rhs; rlx_ref requires equal dtypes.",
))


# ── DotGeneral ────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class DotGeneralAttrs:
    lhs_contracting: tuple = attr(ListOf(USIZE), doc="lhs axes summed over")
    rhs_contracting: tuple = attr(ListOf(USIZE), doc="rhs axes paired with lhs_contracting")
    lhs_batch: tuple = attr(ListOf(USIZE), doc="lhs axes that index independent products")
    rhs_batch: tuple = attr(ListOf(USIZE), doc="rhs axes paired with lhs_batch")


def _free_axes(rank: int, contracting, batch) -> list:
    return [i for i in range(rank) if i not in contracting and i not in batch]


def _check_side(shape: Shape, contracting, batch, side: str) -> None:
    for ax in tuple(contracting) + tuple(batch):
        want(ax < shape.rank, f"(C1) {side} axis {ax} is out of range for rank {shape.rank} "
                              f"({side} {shape})")
    listed = list(contracting) + list(batch)
    dup = sorted({ax for ax in listed if listed.count(ax) > 1})
    want(not dup, f"(C1) {side} axis {dup[0] if dup else ''} is listed more than once in "
                  f"{side}_contracting {list(contracting)} + {side}_batch {list(batch)}")


def _infer_dot_general(shapes, a):
    lhs, rhs = shapes
    _check_side(lhs, a.lhs_contracting, a.lhs_batch, "lhs")
    _check_side(rhs, a.rhs_contracting, a.rhs_batch, "rhs")
    for what in ("contracting", "batch"):
        lax, rax = getattr(a, f"lhs_{what}"), getattr(a, f"rhs_{what}")
        cid = "C2" if what == "contracting" else "C3"
        want(len(lax) == len(rax), f"({cid}) lhs_{what} {list(lax)} and rhs_{what} "
                                   f"{list(rax)} must pair up (same length)")
        for i, j in zip(lax, rax):
            want(_agree(lhs.dims[i], rhs.dims[j]),
                 f"({cid}) {what} axes differ in size: lhs axis {i} is {lhs.dims[i]}, rhs "
                 f"axis {j} is {rhs.dims[j]} (lhs {lhs.dims_text()}, rhs {rhs.dims_text()})")
    batch = [lhs.dims[i] for i in a.lhs_batch]
    lfree = [lhs.dims[i] for i in _free_axes(lhs.rank, a.lhs_contracting, a.lhs_batch)]
    rfree = [rhs.dims[i] for i in _free_axes(rhs.rank, a.rhs_contracting, a.rhs_batch)]
    return Shape(batch + lfree + rfree, lhs.dtype)


def _ref_dot_general(ctx, lhs, rhs):
    a = ctx.attrs
    lb, lc, rb, rc = (list(a.lhs_batch), list(a.lhs_contracting), list(a.rhs_batch),
                      list(a.rhs_contracting))
    lf, rf = _free_axes(lhs.ndim, lc, lb), _free_axes(rhs.ndim, rc, rb)
    batch = [lhs.shape[i] for i in lb]
    lfree, rfree = [lhs.shape[i] for i in lf], [rhs.shape[i] for i in rf]
    k = math.prod(lhs.shape[i] for i in lc)
    # Lay lhs out as [batch..., M, K] and rhs as [batch..., K, N]: one batched matmul.
    x = np.transpose(compute_dtype(lhs), lb + lf + lc).reshape(batch + [math.prod(lfree), k])
    y = np.transpose(compute_dtype(rhs), rb + rc + rf).reshape(batch + [k, math.prod(rfree)])
    with np.errstate(all="ignore"):
        return np.matmul(x, y).reshape(batch + lfree + rfree).astype(ctx.out_np)


def _dot_general_samples(rng):
    def f32(*dims):
        return rng.standard_normal(dims).astype(np.float32)

    dg = DotGeneralAttrs
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    return [
        Sample((a, a), dg((1,), (1,), (), ()), tags=("hand", "A·Aᵀ"),
               expect=np.array([[14, 32], [32, 77]], np.float32)),
        Sample((f32(3, 4), f32(4, 5)), dg((1,), (0,), (), ()), tags=("matmul",)),
        Sample((f32(2, 3, 4), f32(2, 4, 5)), dg((2,), (1,), (0,), (0,)), tags=("batch",)),
        Sample((f32(4, 2, 3), f32(3, 5, 2)), dg((2,), (0,), (1,), (2,)),
               tags=("batch-not-leading",)),
        Sample((f32(2, 3, 5, 7), f32(3, 7, 2, 4)), dg((3,), (1,), (0, 1), (2, 0)),
               tags=("batch-permuted", "prime-length")),
        Sample((f32(2, 3, 4), f32(3, 4, 5)), dg((1, 2), (0, 1), (), ()),
               tags=("multi-contract",)),
        Sample((f32(3), f32(2)), dg((), (), (), ()), tags=("outer",)),
        Sample((np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)),
               dg((0,), (0,), (), ()), tags=("0-d", "dot"), expect=np.float32(32)),
        Sample((np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)),
               dg((1,), (0,), (), ()), tags=("empty",), expect=np.zeros((2, 3), np.float32)),
        Sample((rng.standard_normal((2, 3)), rng.standard_normal((3, 2))),
               dg((1,), (0,), (), ()), tags=("f64",)),
        Sample((f32(2, 3).astype(np.float16), f32(3, 2).astype(np.float16)),
               dg((1,), (0,), (), ()), tags=("f16",)),
    ]


register(OpDef(
    kind="DotGeneral", family="linalg", attrs=DotGeneralAttrs, payload="struct", arity=2,
    caps=BLAS, input_names=("lhs", "rhs"), infer=_infer_dot_general,
    check=lambda s, a, o: _same_numeric_dtype(s, "DotGeneral", "C4"),
    reference=_ref_dot_general,
    doc="XLA's DotGeneral: a product that names its axes. `lhs_batch[i]` pairs with "
        "`rhs_batch[i]` (independent products), `lhs_contracting[i]` with "
        "`rhs_contracting[i]` (summed over); every other axis is free. The output dims "
        "are `[batch dims in lhs_batch order] + [lhs free dims in order] + [rhs free dims in "
        "order]`, so `out[b, i, j] = Σ_c lhs[b, i, c]·rhs[b, c, j]` after each operand's axes "
        "are arranged that way. No contracting axes gives an outer product; contracting "
        "every axis gives a scalar.",
    constraints=(("C1: every listed axis is below its operand's rank, and no axis is "
                  "listed twice on one side (contracting and batch together)."),
                 "C2: the contracting lists have equal length and paired axes equal sizes.",
                 "C3: the batch lists have equal length and paired axes equal sizes.",
                 "C4: both operands share one numeric dtype (not bool); it is the output's."),
    samples=_dot_general_samples, dtypes=FLOATS + (DType.I32,),
    accuracy=reduction(2, lambda a, s: math.prod(s[0].dims[i] for i in a.lhs_contracting)),
    notes="RLX's shape inference returns the lhs shape for DotGeneral (a quirk: any "
          "declared output other than lhs's shape fails RLX's verifier); rlx_ref infers "
          "the true XLA shape. RLX's CPU backend has no DotGeneral kernel.",
))


# ── DenseSolve, BatchedDenseSolve ─────────────────────────────────────────

def _check_solve_operands(a_shape: Shape, b_shape: Shape, batched: bool) -> None:
    kind = "BatchedDenseSolve" if batched else "DenseSolve"
    lead = 1 if batched else 0
    want(a_shape.rank == 2 + lead,
         f"(C1) {kind} needs A of rank {2 + lead} ({'[B, N, N]' if batched else '[N, N]'}), "
         f"got {a_shape}")
    n, n2 = a_shape.dims[lead], a_shape.dims[lead + 1]
    want(_agree(n, n2), f"(C1) {kind} needs a square A, got {a_shape.dims_text()}")
    want(b_shape.rank in (1 + lead, 2 + lead),
         f"(C2) {kind} needs b of shape {'[B, N] or [B, N, K]' if batched else '[N] or [N, K]'}"
         f", got {b_shape}")
    if batched:
        want(_agree(a_shape.dims[0], b_shape.dims[0]),
             f"(C2) BatchedDenseSolve batch sizes differ: A {a_shape.dims_text()} has B="
             f"{a_shape.dims[0]}, b {b_shape.dims_text()} has B={b_shape.dims[0]}")
    want(_agree(n, b_shape.dims[lead]),
         f"(C2) {kind}: A {a_shape.dims_text()} has N={n} but b {b_shape.dims_text()} has "
         f"{b_shape.dims[lead]} rows")
    want(a_shape.dtype == b_shape.dtype and a_shape.dtype.is_float,
         f"(C3) {kind} needs A and b of one float dtype, got {a_shape.dtype} and "
         f"{b_shape.dtype}")


def _infer_solve(shapes, batched: bool) -> Shape:
    """x has b's shape (and dtype) once the operands pass C1-C3."""
    _check_solve_operands(shapes[0], shapes[1], batched)
    return shapes[1]


def _solve_one(a, b, kind: str, where: str = ""):
    """x with a @ x = b by LU with partial pivoting; OpError when a is singular."""
    n = a.shape[0]
    if np.isnan(a).any():
        # LAPACK builds disagree on a NaN pivot (here sgesv reports it singular, dgesv
        # returns NaN), so the spec decides: an A holding NaN is singular, in every dtype
        raise OpError(f"{kind}: A{where} ({n}x{n}) is singular: it holds NaN, so LU with "
                      "partial pivoting has no usable pivot")
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise OpError(f"{kind}: A{where} ({n}x{n}) is singular: LU with partial pivoting "
                      "found an exactly zero pivot, so A @ x = b has no unique solution") \
            from None


def _ref_dense_solve(ctx, a, b):
    return _solve_one(compute_dtype(a), compute_dtype(b), "DenseSolve").astype(ctx.out_np)


def _ref_batched_dense_solve(ctx, a, b):
    a, b = compute_dtype(a), compute_dtype(b)
    x = np.empty(b.shape, np.result_type(a, b))
    # One explicit solve per batch entry: np.linalg.solve would read a [B, N] b as a
    # stack of matrices, not as B right-hand-side vectors.
    for i in range(a.shape[0]):
        x[i] = _solve_one(a[i], b[i], "BatchedDenseSolve", f"[{i}]")
    return x.astype(ctx.out_np)


def _spd(rng, n):
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(np.float32)


def _dense_solve_samples(rng):
    diag = np.array([[2, 0], [0, 4]], np.float32)
    swap = np.array([[0, 1], [1, 0]], np.float32)
    return [
        Sample((diag, np.array([2, 8], np.float32)), None, tags=("hand",),
               expect=np.array([1, 2], np.float32)),
        Sample((swap, np.array([3, 5], np.float32)), None, tags=("pivot", "hand"),
               expect=np.array([5, 3], np.float32)),
        Sample((_spd(rng, 5), rng.standard_normal(5).astype(np.float32)), None,
               tags=("prime-length",)),
        Sample((_spd(rng, 3), rng.standard_normal((3, 4)).astype(np.float32)), None,
               tags=("multi-rhs",)),
        Sample((np.array([[4]], np.float32), np.array([2], np.float32)), None,
               tags=("size-1",), expect=np.array([0.5], np.float32)),
        Sample((np.zeros((0, 0), np.float32), np.zeros(0, np.float32)), None, tags=("empty",)),
        Sample((_spd(rng, 3), np.zeros((3, 0), np.float32)), None, tags=("empty", "K=0")),
        Sample((_spd(rng, 3).astype(np.float64), rng.standard_normal(3)), None,
               tags=("f64",)),
        Sample((_spd(rng, 3).astype(np.float16), np.ones(3, np.float16)), None,
               tags=("f16",)),
    ]


def _batched_solve_samples(rng):
    diag = np.array([[[2, 0], [0, 4]], [[1, 0], [0, -1]]], np.float32)
    return [
        Sample((diag, np.array([[2, 8], [3, 3]], np.float32)), None, tags=("hand", "[B,N]"),
               expect=np.array([[1, 2], [3, -3]], np.float32)),
        Sample((np.stack([_spd(rng, 3) for _ in range(2)]),
                rng.standard_normal((2, 3, 4)).astype(np.float32)), None, tags=("multi-rhs",)),
        Sample((_spd(rng, 5)[None], rng.standard_normal((1, 5)).astype(np.float32)), None,
               tags=("size-1", "prime-length")),
        Sample((np.zeros((0, 3, 3), np.float32), np.zeros((0, 3), np.float32)), None,
               tags=("empty",)),
        Sample((np.stack([_spd(rng, 2) for _ in range(3)]).astype(np.float64),
                rng.standard_normal((3, 2, 2))), None, tags=("f64",)),
    ]


_SOLVE_DOC = (
    "Solves `A @ x = b` for x by LU factorisation with partial pivoting (LAPACK gesv), "
    "one matrix at a time. {layout} The output has b's shape. A singular A (a pivot that "
    "is exactly zero, or any NaN in A) is a run-time error; a nearly singular A gives an "
    "inaccurate x, as LAPACK does. f16/bf16 are solved in f32."
)
_SOLVE_NOTES = ("RLX gives no shape rule (the declared shape is authoritative); rlx_ref "
                "infers b's shape. RLX's CPU lowers F32 and F64 only and panics on a "
                "singular A; rlx_ref raises an error naming the matrix. RLX's CPU calls "
                "LAPACK gesv, whose answer for a NaN in A depends on the build (OpenBLAS: "
                "sgesv reports singular, dgesv returns NaN); rlx_ref defines it as singular.")

register(OpDef(
    kind="DenseSolve", family="linalg", arity=2, caps=BLAS, input_names=("A", "b"),
    infer=lambda s, a: _infer_solve(s, False),
    check=lambda s, a, o: _check_solve_operands(s[0], s[1], False),
    reference=_ref_dense_solve,
    doc=_SOLVE_DOC.format(layout="A is `[N, N]`; b is `[N]` (one right-hand side) or "
                                 "`[N, K]` (K right-hand sides, one per column)."),
    constraints=("C1: A is a square matrix [N, N].",
                 "C2: b is [N] or [N, K] with A's N.",
                 "C3: A and b share one float dtype; it is the output's.",
                 "C4: A is not singular (checked at run time)."),
    samples=_dense_solve_samples, dtypes=FLOATS, notes=_SOLVE_NOTES,
    accuracy=reduction(4, lambda a, s: s[0].dims[-1], "solve"),   # |δx| ≲ c·N·eps·κ(A)·|x|
))

register(OpDef(
    kind="BatchedDenseSolve", family="linalg", arity=2, caps=BLAS, input_names=("A", "b"),
    infer=lambda s, a: _infer_solve(s, True),
    check=lambda s, a, o: _check_solve_operands(s[0], s[1], True),
    reference=_ref_batched_dense_solve,
    doc=_SOLVE_DOC.format(layout="A is `[B, N, N]`; b is `[B, N]` (one right-hand-side "
                                 "vector per batch entry, `x[i] = solve(A[i], b[i])`) or "
                                 "`[B, N, K]` (K right-hand sides per entry)."),
    constraints=("C1: A is a stack of square matrices [B, N, N].",
                 "C2: b is [B, N] or [B, N, K] with A's B and N.",
                 "C3: A and b share one float dtype; it is the output's.",
                 "C4: every A[i] is non-singular (checked at run time)."),
    samples=_batched_solve_samples, dtypes=FLOATS, notes=_SOLVE_NOTES,
    accuracy=reduction(4, lambda a, s: s[0].dims[-1], "solve"),
))
