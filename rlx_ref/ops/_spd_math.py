"""The SPD-manifold formulas, in float64, written as RLX's CPU kernels compute them
(``rlx-cpu/src/spd.rs``): every matrix function is spectral, ``V·diag(f(λ))·Vᵀ`` from a
symmetric eigendecomposition, and every adjoint is the Daleckii–Krein (Loewner) formula.

Eigenvectors are kept as RLX packs them: ``v[k]`` (row ``k``) is eigenvector ``k``.
"""
from __future__ import annotations

import numpy as np

from ._linalg_decomp_math import lower_symmetric, pivot_signs

FLOOR = 1e-12          # RLX's fixed spectral floor of logm / invsqrtm (and their adjoints)
LOEWNER_TOL = 1e-9     # eigenvalue gaps below this (times max(1, max|λ|)) use f'(λ)


def sym(a):
    """½(A + Aᵀ) over the last two axes."""
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def fix_signs(v):
    """Rows scaled by ±1 so each row's pivot entry is positive: the first entry whose
    magnitude is within ``TIE`` of the row's largest (``pivot_signs``, Eigh's rule; LAPACK's
    eigenvector signs are not specified, the packed outputs need one)."""
    v = np.array(v, np.float64)
    return v * pivot_signs(v.T)[:, None]


def eigh(a):
    """(λ ascending, rows = eigenvectors) of symmetric ``a``, signs fixed by ``fix_signs``.

    Only the lower triangle is read: RLX passes its row-major matrix to LAPACK dsyevd as
    column-major with uplo 'U', which is the row-major lower triangle."""
    lam, vecs = np.linalg.eigh(lower_symmetric(np.asarray(a, np.float64)))
    return lam, fix_signs(vecs.T)


def reconstruct(fk, v):
    """Σ_k fk[k]·v[k]ᵀv[k] = Vᵀ·diag(fk)·V with rows of ``v`` the eigenvectors."""
    return v.T @ (np.asarray(fk)[:, None] * v)


def matrix_fn(a, f):
    """V·diag(f(λ))·Vᵀ of symmetric ``a``."""
    lam, v = eigh(a)
    return reconstruct(f(lam), v)


# The scalar spectral functions (and derivatives) RLX uses, floors included.
def sqrt_f(l):
    return np.sqrt(np.maximum(l, 0.0))


def sqrt_fp(l):
    return 0.5 / np.sqrt(np.maximum(l, FLOOR))


def invsqrt_f(l):
    return 1.0 / np.sqrt(np.maximum(l, FLOOR))


def invsqrt_fp(l):
    return -0.5 * np.maximum(l, FLOOR) ** -1.5


def log_f(l):
    return np.log(np.maximum(l, FLOOR))


def log_fp(l):
    return 1.0 / np.maximum(l, FLOOR)


MATFN = {   # SpdMatFn -> (f, f')
    "Logm": (log_f, log_fp),
    "Expm": (np.exp, np.exp),
    "Sqrtm": (sqrt_f, sqrt_fp),
    "Invsqrtm": (invsqrt_f, invsqrt_fp),
}


def loewner(lam, f, fp):
    """P[a,b] = (f(λa) − f(λb))/(λa − λb), or f'(λa) where the gap is within tolerance."""
    fl = f(lam)
    tol = max(float(np.max(np.abs(lam), initial=0.0)), 1.0) * LOEWNER_TOL
    d = lam[:, None] - lam[None, :]
    close = np.abs(d) <= tol
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (fl[:, None] - fl[None, :]) / np.where(close, 1.0, d)
    return np.where(close, fp(lam)[:, None] * np.ones_like(d), p)


def spectral_backward(lam, v, dy, f, fp):
    """dX = sym(U·(P ⊙ Uᵀ·sym(dY)·U)·Uᵀ), U = vᵀ: the adjoint of Y = U f(Σ) Uᵀ."""
    c = v @ sym(dy) @ v.T
    return sym(v.T @ (loewner(lam, f, fp) * c) @ v)


def spectral_forward_packed(x, f):
    """[Y (n²) ∥ λ (n) ∥ U (n²)], U row-major with row k = eigenvector k."""
    lam, v = eigh(x)
    y = reconstruct(f(lam), v)
    return np.concatenate([y.reshape(-1), lam, v.reshape(-1)])


def karcher_mean(covs, wbar, iters: int, tol: float):
    """RLX's fixed-point iteration from the weighted arithmetic mean: S̄ = Σ w̄ᵢ·logm(M^-½
    Cᵢ M^-½), M ← M^½·expm(S̄)·M^½, stopping after the step whose ‖S̄‖_F < tol.

    ``wbar`` None is the unweighted kind, which divides by B where the weighted one
    multiplies by w̄ᵢ (RLX's two loops; they differ in the last bit)."""
    n = covs.shape[-1]
    k = float(max(len(covs), 1))
    term = (lambda i, a: a / k) if wbar is None else (lambda i, a: wbar[i] * a)
    m = np.zeros((n, n))
    for i, c in enumerate(covs):
        m = m + term(i, c)
    for _ in range(iters):
        msqrt, minv = matrix_fn(m, sqrt_f), matrix_fn(m, invsqrt_f)
        sbar = np.zeros((n, n))
        for i, c in enumerate(covs):
            sbar = sbar + term(i, matrix_fn(minv @ c @ minv, log_f))
        m = msqrt @ matrix_fn(sbar, np.exp) @ msqrt
        if np.sqrt(np.sum(sbar * sbar)) < tol:
            break
    return m


def karcher_weights(w, batch: int):
    """w / Σw, or uniform when |Σw| < 1e-300 (RLX's degenerate all-zero case)."""
    s = float(np.sum(w))
    if abs(s) < 1e-300:
        return np.full(batch, 1.0 / max(batch, 1))
    return np.asarray(w, np.float64) / s


def base_roots(p):
    """(λ, v, P^½, P^-½) from one eigendecomposition of the base point."""
    lam, v = eigh(p)
    return lam, v, reconstruct(sqrt_f(lam), v), reconstruct(invsqrt_f(lam), v)


def log_map(p, x):
    _, _, a, w = base_roots(p)
    return a @ matrix_fn(w @ x @ w, log_f) @ a


def exp_map(p, v):
    _, _, a, w = base_roots(p)
    return a @ matrix_fn(w @ v @ w, np.exp) @ a


def parallel_transport(p, q, v):
    _, _, a, w = base_roots(p)
    e = a @ matrix_fn(w @ q @ w, sqrt_f) @ w
    return sym(e @ v @ e.T)


def map_backward(p, x, dy, f, fp):
    """(d_base, d_arg) of Y = A·f(W X W)·A, A = P^½, W = P^-½ (log map: f = log; exp map:
    f = exp), as RLX's ``log_map_backward`` / ``exp_map_backward``."""
    lam_b, v_b, a, w = base_roots(p)
    lam_m, v_m = eigh(w @ x @ w)
    g = sym(dy)
    mbar = spectral_backward(lam_m, v_m, a @ g @ a, f, fp)
    d_x = sym(w @ mbar @ w)
    gal = g @ a @ reconstruct(f(lam_m), v_m)
    mwx = mbar @ w @ x
    d_base = spectral_backward(lam_b, v_b, gal + gal.T, sqrt_f, sqrt_fp) + \
        spectral_backward(lam_b, v_b, mwx + mwx.T, invsqrt_f, invsqrt_fp)
    return sym(d_base), d_x


def transport_backward(p, q, v, dy):
    """(d_from, d_to, d_v) of Y = sym(E V Eᵀ), E = A·S·W, S = (W Q W)^½."""
    lam_f, v_f, a, w = base_roots(p)
    mq = w @ q @ w
    lam_q, v_q = eigh(mq)
    s = reconstruct(sqrt_f(lam_q), v_q)
    e = a @ s @ w
    g = sym(dy)
    d_v = sym(e.T @ g @ e)
    ebar = 2.0 * (g @ e @ v)
    abar, sbar, wbar1 = ebar @ w @ s, a @ ebar @ w, s @ a @ ebar
    mqbar = spectral_backward(lam_q, v_q, sbar, sqrt_f, sqrt_fp)
    d_to = sym(w @ mqbar @ w)
    mqwq = mqbar @ w @ q
    wbar = wbar1 + mqwq + mqwq.T
    d_from = spectral_backward(lam_f, v_f, abar, sqrt_f, sqrt_fp) + \
        spectral_backward(lam_f, v_f, wbar, invsqrt_f, invsqrt_fp)
    return sym(d_from), d_to, d_v


def bn_roots(mean, g, eps: float):
    """(M^-½, G^½) with both spectra floored at ``eps``."""
    return (matrix_fn(mean, lambda l: 1.0 / np.sqrt(np.maximum(l, eps))),
            matrix_fn(g, lambda l: np.sqrt(np.maximum(l, eps))))


def bn_backward_g(x, mean, g, dy, eps: float):
    """dG: Σᵢ (dYᵢ G^½ Cᵢ + Cᵢ G^½ dYᵢ), Cᵢ = M^-½ Xᵢ M^-½, through the √ adjoint of G."""
    ms, gs = bn_roots(mean, g, eps)
    n = g.shape[-1]
    dgs = np.zeros((n, n))
    for xi, gi in zip(x, dy):
        ci = ms @ xi @ ms
        dgs = dgs + gi @ gs @ ci + ci @ gs @ gi
    lam, v = eigh(g)
    return spectral_backward(lam, v, dgs, lambda l: np.sqrt(np.maximum(l, eps)),
                             lambda l: 0.5 / np.sqrt(np.maximum(l, eps)))
