"""Numerics shared by the factorization kinds: sign conventions, eigh packing, well-posed
sample matrices. Everything here works in float64 (RLX's CPU promotes to f64 as well).
"""
from __future__ import annotations

import numpy as np

# Two entries whose magnitudes agree to within this relative margin count as tied for the
# sign pivot, so hand-made vectors such as (1, -1)/√2 pick their first entry whatever the
# rounding of the solver that produced them.
TIE = 1e-3


def pivot_signs(u: np.ndarray) -> np.ndarray:
    """±1 per column of ``u`` [n, k]: the sign of the column's pivot entry, the first one
    whose magnitude is within ``TIE`` of the column's largest (1 for zero or NaN columns)."""
    n, k = u.shape
    if n == 0 or k == 0:
        return np.ones(k)
    mag = np.abs(u)
    with np.errstate(invalid="ignore"):
        top = mag.max(axis=0)
        pick = np.argmax(mag >= (1.0 - TIE) * top, axis=0)
    s = np.sign(u[pick, np.arange(k)])
    return np.where((s == 0) | np.isnan(s), 1.0, s)


def lower_symmetric(a: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle is ``a``'s (the upper one is not read)."""
    low = np.tril(a)
    return low + np.tril(a, -1).T


def eigh_packed(a: np.ndarray) -> np.ndarray:
    """``[λ ascending ∥ U row-major]`` of the symmetric matrix read from ``a``'s lower
    triangle; column j of U is eigenvector j, its pivot entry positive."""
    n = a.shape[0]
    if n == 0:
        return np.zeros(0)
    lam, u = np.linalg.eigh(lower_symmetric(a))
    u = u * pivot_signs(u)
    return np.concatenate([lam, u.reshape(-1)])


def packed_n(length: int) -> int | None:
    """n with n² + n == length, or None when no integer n fits."""
    n = int(round((np.sqrt(1 + 4 * length) - 1) / 2))
    return n if n * n + n == length else None


def eigh_backward(fwd: np.ndarray, bar: np.ndarray, n: int) -> np.ndarray:
    """Ā = sym(U (diag(λ̄) + F ∘ (Uᵀ Ū)) Uᵀ), F_ij = 1/(λ_j − λ_i) off the diagonal and 0
    across a gap no wider than max(1, max|λ|)·1e-9 (RLX's ``eigh_backward_packed``)."""
    lam, u = fwd[:n], fwd[n:].reshape(n, n)
    lbar, ubar = bar[:n], bar[n:].reshape(n, n)
    if n == 0:
        return np.zeros((0, 0))
    c = u.T @ ubar
    tol = max(1.0, float(np.max(np.abs(lam)))) * 1e-9
    d = lam[None, :] - lam[:, None]                      # d[i, j] = λ_j − λ_i
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = np.where(np.abs(d) > tol, c / np.where(d == 0, 1.0, d), 0.0)
    mid[np.diag_indices(n)] = lbar
    g = u @ mid @ u.T
    return 0.5 * (g + g.T)


# ── well-posed sample matrices (a factor's error grows with the condition number) ──

def orthogonal(rng, n: int) -> np.ndarray:
    """A random n×n orthogonal matrix (Q of a Gaussian matrix, diag(R) made positive)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def spd(rng, n: int) -> np.ndarray:
    """M·Mᵀ + n·I: symmetric positive definite with κ₂ ≲ 5 for small n."""
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def with_spectrum(rng, lam) -> np.ndarray:
    """Q·diag(λ)·Qᵀ for a random orthogonal Q: a symmetric matrix with eigenvalues λ."""
    q = orthogonal(rng, len(lam))
    return (q * np.asarray(lam, np.float64)) @ q.T


def separated(rng, n: int, low: float = 1.0) -> np.ndarray:
    """n ascending values from ``low`` with gaps in [1, 2): eigen/singular vectors stable."""
    return low + np.cumsum(1.0 + rng.random(n)) - 1.0


def with_singular_values(rng, m: int, n: int, s) -> np.ndarray:
    """U·diag(s)·Vᵀ [m, n] with random orthonormal U, V and the given singular values."""
    k = len(s)
    u, v = orthogonal(rng, m)[:, :k], orthogonal(rng, n)[:, :k]
    return (u * np.asarray(s, np.float64)) @ v.T
