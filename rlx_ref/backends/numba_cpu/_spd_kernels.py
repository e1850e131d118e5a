"""Numba source of the SPD-manifold kernels: one module, every kind a function over f64
C-contiguous arrays, built on one eigendecomposition (``np.linalg.eigh`` inside ``njit``,
LAPACK dsyevd) and one Daleckii–Krein adjoint, as ``ops/_spd_math`` (the oracle).

A spectral function is chosen by an integer code (``FN``) so every kind shares the same
compiled ``spectral``/``adjoint`` loops instead of one closure per function.
"""
from __future__ import annotations

from ...ops._linalg_decomp_math import TIE
from ...ops._spd_math import FLOOR
from ..codegen.literal import py_float
from .kernels import compile_kernel

# f(λ) codes; each one's derivative is the same code in ``_dfn``
FN = {"max_eps": 0, "log_eps": 1, "sqrt": 2, "invsqrt": 3, "log": 4, "exp": 5,
      "sqrt_eps": 6, "invsqrt_eps": 7}
MATFN = {"Logm": FN["log"], "Expm": FN["exp"], "Sqrtm": FN["sqrt"], "Invsqrtm": FN["invsqrt"]}

SPD_SRC = '''
FLOOR = ''' + py_float(FLOOR) + '''
TIE = ''' + py_float(TIE) + '''


@njit(cache=True)
def _fn(code, l, eps):
    if code == 0:
        return max(l, eps)
    if code == 1:
        return math.log(max(l, eps))
    if code == 2:
        return math.sqrt(max(l, 0.0))
    if code == 3:
        return 1.0 / math.sqrt(max(l, FLOOR))
    if code == 4:
        return math.log(max(l, FLOOR))
    if code == 5:
        return math.exp(l)
    if code == 6:
        return math.sqrt(max(l, eps))
    return 1.0 / math.sqrt(max(l, eps))


@njit(cache=True)
def _dfn(code, l, eps):
    if code == 0:
        return 1.0 if l > eps else 0.0
    if code == 1:
        return 1.0 / max(l, eps)
    if code == 2:
        return 0.5 / math.sqrt(max(l, FLOOR))
    if code == 3:
        return -0.5 * max(l, FLOOR) ** -1.5
    if code == 4:
        return 1.0 / max(l, FLOOR)
    if code == 5:
        return math.exp(l)
    if code == 6:
        return 0.5 / math.sqrt(max(l, eps))
    return -0.5 * max(l, eps) ** -1.5


@njit(cache=True)
def eig_rows(a):
    """(λ ascending, rows = eigenvectors) from a's lower triangle, each eigenvector's
    pivot entry (the first within TIE of its largest magnitude) positive."""
    n = a.shape[0]
    s = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            s[i, j] = a[i, j]
            s[j, i] = a[i, j]
    lam, vecs = np.linalg.eigh(s)
    v = np.ascontiguousarray(vecs.T)
    for k in range(n):
        top = 0.0
        for j in range(n):
            top = max(top, abs(v[k, j]))
        big = 0
        while big < n - 1 and abs(v[k, big]) < (1.0 - TIE) * top:
            big += 1
        if v[k, big] < 0:
            for j in range(n):
                v[k, j] = -v[k, j]
    return lam, v


@njit(cache=True)
def recon(fk, v):
    """Vᵀ·diag(fk)·V."""
    n = v.shape[0]
    sv = np.empty((n, n))
    for k in range(n):
        for j in range(n):
            sv[k, j] = fk[k] * v[k, j]
    return np.ascontiguousarray(v.T) @ sv


@njit(cache=True)
def fvals(code, lam, eps):
    out = np.empty(lam.shape[0])
    for k in range(lam.shape[0]):
        out[k] = _fn(code, lam[k], eps)
    return out


@njit(cache=True)
def mfn(code, a, eps):
    lam, v = eig_rows(a)
    return recon(fvals(code, lam, eps), v)


@njit(cache=True)
def sym(a):
    return 0.5 * (a + a.T)


@njit(cache=True)
def adjoint(code, lam, v, dy, eps):
    """sym(Vᵀ·(P ⊙ V·sym(dy)·Vᵀ)·V) with the Loewner matrix P of f."""
    n = lam.shape[0]
    vt = np.ascontiguousarray(v.T)
    c = v @ np.ascontiguousarray(sym(dy)) @ vt
    fl = fvals(code, lam, eps)
    scale = 1.0
    for k in range(n):
        scale = max(scale, abs(lam[k]))
    tol = scale * 1e-9
    for a in range(n):
        for b in range(n):
            d = lam[a] - lam[b]
            p = (fl[a] - fl[b]) / d if abs(d) > tol else _dfn(code, lam[a], eps)
            c[a, b] *= p
    return sym(vt @ c @ v)


@njit(cache=True)
def spectral_packed(out, x, code, eps):
    n = x.shape[0]
    lam, v = eig_rows(x)
    y = recon(fvals(code, lam, eps), v)
    out[:n * n] = y.reshape(-1)
    out[n * n:n * n + n] = lam
    out[n * n + n:] = v.reshape(-1)


@njit(cache=True)
def spectral_bwd(out, lam, u, dy, code, eps):
    n = lam.shape[0]
    out[:, :] = adjoint(code, lam, u.reshape(n, n), dy.reshape(n, n), eps)


@njit(cache=True)
def matfn_batch(out, x, code):
    for b in range(x.shape[0]):
        out[b] = mfn(code, x[b], 0.0)


@njit(cache=True)
def matfn_batch_bwd(out, x, dy, code):
    for b in range(x.shape[0]):
        lam, v = eig_rows(x[b])
        out[b] = adjoint(code, lam, v, dy[b], 0.0)


@njit(cache=True)
def bimap(out, w, x):
    out[:, :] = (w @ x) @ np.ascontiguousarray(w.T)


@njit(cache=True)
def bn(out, x, mean, g, eps):
    ms = mfn(7, mean, eps)
    gs = mfn(6, g, eps)
    for b in range(x.shape[0]):
        out[b] = gs @ (ms @ x[b] @ ms) @ gs


@njit(cache=True)
def bn_bwd_x(out, mean, g, dy, eps):
    q = mfn(7, mean, eps) @ mfn(6, g, eps)
    qt = np.ascontiguousarray(q.T)
    for b in range(dy.shape[0]):
        out[b] = sym(q @ dy[b] @ qt)


@njit(cache=True)
def bn_bwd_g(out, x, mean, g, dy, eps):
    ms = mfn(7, mean, eps)
    gs = mfn(6, g, eps)
    n = g.shape[0]
    dgs = np.zeros((n, n))
    for b in range(x.shape[0]):
        ci = ms @ x[b] @ ms
        dgs += dy[b] @ gs @ ci + ci @ gs @ dy[b]
    lam, v = eig_rows(g)
    out[:, :] = adjoint(6, lam, v, dgs, eps)


@njit(cache=True)
def karcher(out, x, w, weighted, iters, tol):
    """RLX's iteration; ``weighted`` False divides by B (the unweighted kind's loop)."""
    n, nb = x.shape[1], x.shape[0]
    k = float(max(nb, 1))
    m = np.zeros((n, n))
    for b in range(nb):
        m = m + (w[b] * x[b] if weighted else x[b] / k)
    for _ in range(iters):
        msqrt = mfn(2, m, 0.0)
        minv = mfn(3, m, 0.0)
        sbar = np.zeros((n, n))
        for b in range(nb):
            lg = mfn(4, minv @ x[b] @ minv, 0.0)
            sbar = sbar + (w[b] * lg if weighted else lg / k)
        m = msqrt @ mfn(5, sbar, 0.0) @ msqrt
        if math.sqrt(np.sum(sbar * sbar)) < tol:
            break
    out[:, :] = m


@njit(cache=True)
def roots(p):
    lam, v = eig_rows(p)
    return lam, v, recon(fvals(2, lam, 0.0), v), recon(fvals(3, lam, 0.0), v)


@njit(cache=True)
def amap(out, p, x, code):
    """A·f(W x W)·A (log map: code 4; exp map: code 5)."""
    lam, v, a, w = roots(p)
    out[:, :] = a @ mfn(code, w @ x @ w, 0.0) @ a


@njit(cache=True)
def transport(out, p, q, v):
    lam, vv, a, w = roots(p)
    e = a @ mfn(2, w @ q @ w, 0.0) @ w
    out[:, :] = sym(e @ v @ np.ascontiguousarray(e.T))


@njit(cache=True)
def amap_bwd(out, p, x, dy, code):
    lam_b, v_b, a, w = roots(p)
    lam_m, v_m = eig_rows(w @ x @ w)
    g = np.ascontiguousarray(sym(dy))
    mbar = adjoint(code, lam_m, v_m, a @ g @ a, 0.0)
    out[1] = sym(w @ mbar @ w)
    gal = g @ a @ recon(fvals(code, lam_m, 0.0), v_m)
    mwx = mbar @ w @ x
    d = adjoint(2, lam_b, v_b, gal + gal.T, 0.0) + adjoint(3, lam_b, v_b, mwx + mwx.T, 0.0)
    out[0] = sym(d)


@njit(cache=True)
def transport_bwd(out, p, q, v, dy):
    lam_f, v_f, a, w = roots(p)
    lam_q, v_q = eig_rows(w @ q @ w)
    s = recon(fvals(2, lam_q, 0.0), v_q)
    e = a @ s @ w
    g = np.ascontiguousarray(sym(dy))
    out[2] = sym(np.ascontiguousarray(e.T) @ g @ e)
    ebar = 2.0 * (g @ e @ v)
    mqbar = adjoint(2, lam_q, v_q, a @ ebar @ w, 0.0)
    out[1] = sym(w @ mqbar @ w)
    mqwq = mqbar @ w @ q
    wbar = s @ a @ ebar + mqwq + mqwq.T
    d = adjoint(2, lam_f, v_f, ebar @ w @ s, 0.0) + adjoint(3, lam_f, v_f, wbar, 0.0)
    out[0] = sym(d)
'''

_KERNEL = None


def spd_kernel():
    """The compiled SPD module (one per process; Numba caches each function on disk)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = compile_kernel("spectral_packed", SPD_SRC)
    return _KERNEL
