"""Linear-algebra factorizations: Cholesky, TriangularSolve, Det, LogDet (here), Svd, Qr
(``_linalg_svd_qr``) and Eigh, EighBackward, EighBatch, EighBatchBackward (``_linalg_eigh``).

Every kind reads f32 or f64 matrices, computes in float64 (LAPACK through numpy, as RLX's
CPU promotes f32 to f64 around its LAPACK calls) and rounds the result once. Factors that
are unique only up to signs get a stated convention, applied after LAPACK: SVD columns of U
and eigenvectors have their pivot entry (the first of largest magnitude) positive, QR has
diag(R) >= 0. Accuracy contracts scale with the matrix size and the output's magnitude;
the samples are well conditioned (SPD as M·Mᵀ + n·I, spectra with gaps >= 1), since a
factor's error also grows with the condition number or the inverse spectral gap.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction, ulp
from ..ir.shape import Dyn, Shape
from . import _linalg_decomp_samples as smp
from ._linalg_decomp_common import (BLAS, DTYPES, F64_NOTE, FAMILY, finite, float_dtype,
                                    size_k, square)
from ._linalg_decomp_math import lower_symmetric
from .codec import BOOL, attr
from .opdef import OpDef, OpError, register, want


# ── Cholesky ──────────────────────────────────────────────────────────────

def _infer_cholesky(shapes, a):
    square(shapes[0], "Cholesky")
    return Shape([square(shapes[0], "Cholesky")] * 2, shapes[0].dtype)


def _ref_cholesky(ctx, a):
    a64 = np.asarray(a, np.float64)
    n = a64.shape[0]
    low = np.tril(a64)
    finite(low, "Cholesky", "C3")
    try:
        out = np.linalg.cholesky(lower_symmetric(a64)) if n else np.zeros((0, 0))
    except np.linalg.LinAlgError:
        raise OpError(f"(C3) Cholesky: A ({n}x{n}, read from its lower triangle) is not "
                      "positive definite: a pivot under the square root is <= 0") from None
    return out.astype(ctx.out_np)


register(OpDef(
    kind="Cholesky", family=FAMILY, caps=BLAS, input_names=("A",),
    infer=_infer_cholesky, check=lambda s, a, o: float_dtype(s[0], "Cholesky", "C2"),
    reference=_ref_cholesky,
    doc="Cholesky factor of a symmetric positive-definite matrix: `A [n, n] -> L [n, n]` "
        "lower triangular with a positive diagonal and the strict upper triangle zero, "
        "`A = L·Lᵀ` (unique). Only A's lower triangle (with the diagonal) is read; the upper "
        "one is taken to mirror it, whatever it holds. An empty A gives an empty L.",
    constraints=("C1: A is a square matrix [n, n].",
                 "C2: A is f32 or f64; L has A's shape and dtype.",
                 "C3: A's lower triangle is finite and describes a positive-definite matrix "
                 "(checked at run time)."),
    samples=smp.cholesky_samples, dtypes=DTYPES,
    accuracy=reduction(4, size_k, "all", reason="backward stable: |δL| ≲ c·n·eps·κ·|L|"),
    notes=F64_NOTE.format(what="potrf") + " RLX panics on a non-SPD A; rlx_ref raises an "
          "error. potrf reads the row-major lower triangle in RLX as here.",
))


# ── TriangularSolve ───────────────────────────────────────────────────────

@dataclass(frozen=True)
class TriangularSolveAttrs:
    lower: bool = attr(BOOL, doc="read A's lower triangle (else its upper one)")
    transpose: bool = attr(BOOL, doc="solve Aᵀ·X = B instead of A·X = B")


def _check_trisolve(shapes, a, out=None) -> None:
    n = square(shapes[0], "TriangularSolve")
    b = shapes[1]
    want(b.rank in (1, 2), f"(C2) TriangularSolve needs B of shape [n] or [n, nrhs], got {b}")
    rows = b.dims[0]
    want(rows == n or isinstance(rows, Dyn) or isinstance(n, Dyn),
         f"(C2) TriangularSolve: A {shapes[0].dims_text()} has n={n} but B "
         f"{b.dims_text()} has {rows} rows")
    float_dtype(shapes[0], "TriangularSolve", "C3")
    want(shapes[1].dtype == shapes[0].dtype, f"(C3) TriangularSolve operands must share one "
                                             f"dtype, got {shapes[0].dtype} and {b.dtype}")


def _infer_trisolve(shapes, a):
    _check_trisolve(shapes, a)
    return shapes[1]


def tri_solve(a: np.ndarray, b: np.ndarray, lower: bool, transpose: bool) -> np.ndarray:
    """X with op(T)·X = B, T = A's lower/upper triangle, by substitution row by row (IEEE
    division: a zero diagonal gives ±inf/NaN, as BLAS trsm)."""
    t = np.tril(a) if lower else np.triu(a)
    if transpose:
        t, lower = t.T, not lower
    n = t.shape[0]
    x = np.array(b, np.float64, copy=True)
    with np.errstate(all="ignore"):
        for i in (range(n) if lower else range(n - 1, -1, -1)):
            done = slice(0, i) if lower else slice(i + 1, n)
            x[i] = (x[i] - t[i, done] @ x[done]) / t[i, i]
    return x


def _ref_trisolve(ctx, a, b):
    at = ctx.attrs
    x = tri_solve(np.asarray(a, np.float64), np.asarray(b, np.float64), at.lower, at.transpose)
    return x.astype(ctx.out_np)


register(OpDef(
    kind="TriangularSolve", family=FAMILY, attrs=TriangularSolveAttrs, payload="struct",
    arity=2, caps=BLAS, input_names=("A", "B"), infer=_infer_trisolve,
    check=_check_trisolve, reference=_ref_trisolve,
    doc="Solves `op(T)·X = B` where T is A's lower (`lower`) or upper triangle, diagonal "
        "included (not unit), and `op(T) = Tᵀ` when `transpose`. The other triangle of A is "
        "never read. B is `[n]` (one right-hand side) or `[n, nrhs]`; X has B's shape. "
        "Substitution runs forward for a lower op(T) and backward for an upper one; a zero "
        "on the diagonal is not an error and gives ±inf/NaN by IEEE division, as BLAS trsm.",
    constraints=("C1: A is a square matrix [n, n].",
                 "C2: B is [n] or [n, nrhs] with A's n.",
                 "C3: A and B share one dtype, f32 or f64; it is X's."),
    samples=smp.trisolve_samples, dtypes=DTYPES,
    accuracy=reduction(4, size_k, "all", reason="|δx| ≲ c·n·eps·κ(T)·|x|; samples have "
                                                "dominant diagonals"),
    notes=F64_NOTE.format(what="cblas_dtrsm, non-unit diagonal"),
))


# ── Det, LogDet ───────────────────────────────────────────────────────────

def _infer_det(kind: str):
    def infer(shapes, a):
        square(shapes[0], kind)
        return Shape((), shapes[0].dtype)
    return infer


def _ref_det(ctx, a):
    a64 = np.asarray(a, np.float64)
    with np.errstate(all="ignore"):
        return np.asarray(np.linalg.det(a64) if a64.size else 1.0).astype(ctx.out_np)


def _ref_logdet(ctx, a):
    a64 = np.asarray(a, np.float64)
    with np.errstate(all="ignore"):
        if not a64.size:
            return np.asarray(0.0, ctx.out_np)
        sign, logabs = np.linalg.slogdet(a64)
        return np.asarray(np.nan if np.isnan(sign) else logabs).astype(ctx.out_np)


_DET_CONSTRAINTS = ("C1: A is a square matrix [n, n]; the output is a scalar [].",
                    "C2: A is f32 or f64; it is the output's dtype.")


def _det_accuracy(attrs, shapes, dt):
    # Det's error is relative (a product of n pivots); LogDet's absolute (a sum of n logs)
    return reduction(4, size_k(attrs, shapes), "value", reason="relative, c·n·eps·κ·|det|")


register(OpDef(
    kind="Det", family=FAMILY, caps=BLAS, input_names=("A",), infer=_infer_det("Det"),
    check=lambda s, a, o: float_dtype(s[0], "Det", "C2"), reference=_ref_det,
    doc="Determinant of a square matrix, `A [n, n] -> []`, from an LU factorization with "
        "partial pivoting (LAPACK getrf): the product of U's diagonal, negated once per row "
        "swap. An exactly zero pivot gives 0; NaN propagates; an empty A gives 1.",
    constraints=_DET_CONSTRAINTS, samples=smp.det_samples("Det"), dtypes=DTYPES,
    accuracy=_det_accuracy, notes=F64_NOTE.format(what="getrf"),
))

register(OpDef(
    kind="LogDet", family=FAMILY, caps=BLAS, input_names=("A",), infer=_infer_det("LogDet"),
    check=lambda s, a, o: float_dtype(s[0], "LogDet", "C2"), reference=_ref_logdet,
    doc="`log|det(A)|` of a square matrix, `A [n, n] -> []`, as the sum of `log|Uᵢᵢ|` over "
        "the LU factorization's pivots (no overflow where Det would). The sign is dropped; "
        "a singular A (an exactly zero pivot) gives -inf; NaN propagates; an empty A gives 0.",
    constraints=_DET_CONSTRAINTS, samples=smp.det_samples("LogDet"), dtypes=DTYPES,
    accuracy=lambda at, s, dt: ulp(4, floor=4 * size_k(at, s), cap=1.0, at_least=1.0,
                                   reason="absolute: n logs each off by ~κ·eps"),
    notes=F64_NOTE.format(what="getrf; Det and LogDet share one thunk"),
))

from ._linalg_svd_qr import QrAttrs, SvdAttrs  # noqa: E402,F401  (Svd, Qr)
from . import _linalg_eigh  # noqa: E402,F401  (registers the Eigh kinds of this family)
