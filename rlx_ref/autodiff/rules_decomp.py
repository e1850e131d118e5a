"""VJP rules of the factorizations, Sort and Fft: Cholesky, TriangularSolve, Det, LogDet,
Eigh, EighBatch, Sort, Fft and LogMel.

The factorizations that read only one triangle of A (Cholesky, TriangularSolve, Eigh) get
the derivative of the op as defined: entries outside the read triangle get 0, and the
symmetric gradient ``Ā`` RLX's backward kinds return is folded onto the lower triangle
(``tril(Ā) + tril(Ā, -1)``). For a symmetric perturbation of A both give the same change.
"""
from __future__ import annotations

import numpy as np

from ._build import binary, constant, reshape, scalar, swap_last_two
from .vjp import vjp_rule


def _trilu(g, x: int, upper: bool, diagonal: int = 0) -> int:
    return g.op("Trilu", (x,), upper=upper, diagonal=diagonal)


def _fold_lower(g, sym: int) -> int:
    """A symmetric gradient folded onto the lower triangle: off-diagonal entries doubled."""
    return binary(g, "Add", _trilu(g, sym, False, 0), _trilu(g, sym, False, -1))


def _phi(g, x: int) -> int:
    """The lower triangle with its diagonal halved (the Cholesky adjoint's Φ)."""
    half = scalar(g, 0.5, g.shape(x).dtype)
    return binary(g, "Mul", _fold_lower(g, x), half)


def _tsolve(g, a: int, b: int, lower: bool, transpose: bool) -> int:
    return g.op("TriangularSolve", (a, b), lower=lower, transpose=transpose)


@vjp_rule("Cholesky")
def vjp_cholesky(ctx, dy):
    """L = chol(A): S = L⁻ᵀ·Φ(Lᵀ·L̄)·L⁻¹, Ā = Φ(S + Sᵀ) on the lower triangle A is read
    from (L̄'s strict upper part never reaches Φ: Lᵀ is upper triangular)."""
    g, lo = ctx.g, ctx.y
    p = _phi(g, g.op("MatMul", (swap_last_two(g, lo), dy)))
    z = _tsolve(g, lo, p, lower=True, transpose=True)                  # L⁻ᵀ·P
    s = swap_last_two(g, _tsolve(g, lo, swap_last_two(g, z), True, True))   # (L⁻ᵀ·Zᵀ)ᵀ
    return [_phi(g, binary(g, "Add", s, swap_last_two(g, s)))]


def _outer(g, col: int, row: int) -> int:
    n, m = g.shape(col).dims[0], g.shape(row).dims[0]
    return g.op("MatMul", (reshape(g, col, (n, 1)), reshape(g, row, (1, m))))


@vjp_rule("TriangularSolve")
def vjp_triangular_solve(ctx, dy):
    """X = op(T)⁻¹·B: B̄ = op(T)⁻ᵀ·X̄ (one more solve); op(T)̄ = -B̄·Xᵀ, transposed back
    when op(T) = Tᵀ, and kept on the triangle T is read from."""
    g, a = ctx.g, ctx.x[0]
    lower, trans = bool(ctx.attrs.lower), bool(ctx.attrs.transpose)
    db = _tsolve(g, a, dy, lower, not trans)
    if ctx.in_shapes[1].rank == 1:
        dop = _outer(g, db, ctx.y) if not trans else _outer(g, ctx.y, db)
    elif not trans:
        dop = g.op("MatMul", (db, swap_last_two(g, ctx.y)))
    else:
        dop = g.op("MatMul", (ctx.y, swap_last_two(g, db)))
    da = g.op("Activation", (dop,), op="Neg")
    return [_trilu(g, da, upper=not lower), db]


def _inverse_transposed(g, a: int) -> int:
    """A⁻ᵀ as the solve Aᵀ·Z = I."""
    s = g.shape(a)
    n = s.dims[-1]
    eye = constant(g, np.eye(n), s.dtype, (n, n))
    return g.op("DenseSolve", (swap_last_two(g, a), eye))


@vjp_rule("Det")
def vjp_det(ctx, dy):
    """d det(A) = det(A)·A⁻ᵀ (Jacobi's formula; A must be invertible)."""
    g = ctx.g
    scale = binary(g, "Mul", dy, ctx.y)
    return [binary(g, "Mul", _inverse_transposed(g, ctx.x[0]), scale)]


@vjp_rule("LogDet")
def vjp_logdet(ctx, dy):
    """d log|det(A)| = A⁻ᵀ, whatever det's sign."""
    g = ctx.g
    return [binary(g, "Mul", _inverse_transposed(g, ctx.x[0]), dy)]


@vjp_rule("Eigh", "EighBatch")
def vjp_eigh(ctx, dy):
    """RLX's EighBackward / EighBatchBackward (Ā symmetric), folded onto the lower
    triangle the forward reads."""
    g = ctx.g
    kind = "EighBackward" if ctx.node.kind == "Eigh" else "EighBatchBackward"
    return [_fold_lower(g, g.op(kind, (ctx.y, dy)))]


@vjp_rule("Sort")
def vjp_sort(ctx, dy):
    """y = x sorted: x̄[perm[i]] = ȳ[i], gathered through the inverse permutation (the
    arg-sort of the stable arg-sort; ties keep the order the forward gave them)."""
    g, a = ctx.g, ctx.attrs
    perm = g.op("ArgSort", (ctx.x[0],), axis=a.axis, descending=a.descending)
    inv = g.op("ArgSort", (perm,), axis=a.axis, descending=False)
    if not g.shape(inv).dtype.is_int:
        from ..ir.dtype import DType

        inv = g.op("Cast", (inv,), to=DType.I32)
    return [g.op("GatherElements", (dy, inv), axis=a.axis)]


def _fft_scale(inverse: bool, norm: str, n: int) -> float:
    """The factor RLX's Fft applies on top of the bare sum."""
    if norm == "Ortho":
        return 1.0 / np.sqrt(n)
    if norm == "Forward" and inverse:
        return 1.0 / n
    return 1.0


@vjp_rule("Fft")
def vjp_fft(ctx, dy):
    """y = s·M·x with M the DFT matrix or its conjugate: x̄ = s·Mᴴ·ȳ, the opposite
    direction unscaled, times s. The 2N real block's transpose is Mᴴ's real block, and C64
    follows the conjugate-transpose convention of the complex Binary rules."""
    g, a = ctx.g, ctx.attrs
    s = ctx.in_shapes[0]
    n = s.dims[-1] if s.dtype.name == "C64" else s.dims[-1] // 2
    norm = str(a.norm)
    back = g.op("Fft", (dy,), inverse=not a.inverse, norm="Backward")
    k = _fft_scale(bool(a.inverse), norm, n)
    if k == 1.0:
        return [back]
    return [binary(g, "Mul", back, scalar(g, k, s.dtype))]


@vjp_rule("LogMel")
def vjp_log_mel(ctx, dy):
    """RLX's LogMelBackward for the spectrum (it ignores the frame floor's dependence on the
    loudest mel, as RLX does); the mel filters are constants (CONSTANT_OPERANDS)."""
    return [ctx.g.op("LogMelBackward", (*ctx.x, dy)), None]
