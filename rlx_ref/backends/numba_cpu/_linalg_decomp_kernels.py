"""Kernel source of the factorization kinds (numba-cpu). Every kernel works in float64 on
C-contiguous arrays; the lowering converts f32 operands and rounds the result once, as the
oracle (and RLX's CPU, which promotes to f64 around LAPACK) does. The factorizations call
Numba's LAPACK-backed ``np.linalg`` and then apply the sign conventions of
``rlx_ref.ops._linalg_decomp_math``; TriangularSolve and the determinants are loop kernels
(IEEE division where the oracle's formulas divide, which ``np.linalg`` would refuse).
"""
from __future__ import annotations

from ...ops._linalg_decomp_math import TIE
from ..codegen.literal import py_float

SRC = '''
from numba import types
from numba.np.linalg import _LAPACK

TIE = ''' + py_float(TIE) + '''
# LAPACK's gesdd as Numba's np.linalg.svd calls it, for the values-only job
GESDD = _LAPACK().numba_ez_gesdd(types.float64)


@njit(cache=True, nogil=True)
def pivot_signs(u):
    # ±1 per column: the sign of its first entry within TIE of the column's largest |.|
    n, k = u.shape
    s = np.ones(k)
    for j in range(k):
        top = 0.0
        for i in range(n):
            top = max(top, abs(u[i, j]))
        lim = (1.0 - TIE) * top
        for i in range(n):
            if abs(u[i, j]) >= lim:
                if u[i, j] < 0:
                    s[j] = -1.0
                break
    return s


@njit(cache=True, nogil=True)
def lower_sym(a):
    n = a.shape[0]
    s = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            s[i, j] = a[i, j]
            s[j, i] = a[i, j]
    return s


@njit(cache=True, nogil=True)
def cholesky(a, out):
    out[:, :] = np.linalg.cholesky(lower_sym(a))


@njit(cache=True, nogil=True, error_model="numpy")
def trisolve(a, x, lower, transpose):
    # x [n, k]: B in, X out; op(T)[i, j] is a[j, i] when transposed, and op(T) is lower
    # triangular (forward substitution) when exactly one of lower/transpose holds
    n, k = x.shape
    lo = lower != transpose
    for step in range(n):
        i = step if lo else n - 1 - step
        j0, j1 = (0, i) if lo else (i + 1, n)
        for c in range(k):
            acc = 0.0
            for j in range(j0, j1):
                t = a[j, i] if transpose else a[i, j]
                acc += t * x[j, c]
            x[i, c] = (x[i, c] - acc) / a[i, i]


@njit(cache=True, nogil=True, error_model="numpy")
def det(a, log_abs):
    # LU with partial pivoting (the first largest |a[i, j]|, as getf2) on a (overwritten)
    n = a.shape[0]
    d, logabs = 1.0, 0.0
    for j in range(n):
        p, best = j, abs(a[j, j])
        for i in range(j + 1, n):
            if abs(a[i, j]) > best:
                p, best = i, abs(a[i, j])
        if p != j:
            for c in range(n):
                a[p, c], a[j, c] = a[j, c], a[p, c]
            d = -d
        piv = a[j, j]
        if piv == 0.0:
            return -np.inf if log_abs else 0.0
        d *= piv
        logabs += math.log(abs(piv))
        for i in range(j + 1, n):
            f = a[i, j] / piv
            for c in range(j + 1, n):
                a[i, c] -= f * a[j, c]
    return logabs if log_abs else d


@njit(cache=True, nogil=True)
def svd(a, part, out2):
    # part 0: U [m, k], 1: S as [1, k], 2: Vt [k, n]; U's columns pivot-positive
    # (S alone goes through svd_values)
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    sg = pivot_signs(u)
    k = s.size
    if part == 0:
        for i in range(u.shape[0]):
            for j in range(k):
                out2[i, j] = u[i, j] * sg[j]
    elif part == 1:
        for j in range(k):
            out2[0, j] = s[j]
    else:
        for j in range(k):
            for c in range(vt.shape[1]):
                out2[j, c] = vt[j, c] * sg[j]


@njit(cache=True, nogil=True)
def svd_values(a, out2):
    # S only: gesdd with jobz 'N' skips U and Vt (~3x less work than np.linalg.svd).
    # C-order A read as Fortran order is Aᵀ, which has the same singular values.
    m, n = a.shape
    f = a.copy()
    s = np.empty(min(m, n))
    d = np.empty(1)
    info = GESDD(ord("d"), ord("N"), n, m, f.ctypes, n, s.ctypes, d.ctypes, 1, d.ctypes, 1)
    if info != 0:
        raise np.linalg.LinAlgError("SVD did not converge.")
    out2[0, :] = s


@njit(cache=True, nogil=True)
def qr(a, part, out2):
    # part 0: Q [m, k], 1: R [k, n]; diag(R) >= 0, Q's columns following
    q, r = np.linalg.qr(a)
    k = r.shape[0]
    for j in range(k):
        sg = -1.0 if r[j, j] < 0 else 1.0
        if part == 0:
            for i in range(q.shape[0]):
                out2[i, j] = q[i, j] * sg
        else:
            for c in range(r.shape[1]):
                out2[j, c] = r[j, c] * sg


@njit(cache=True, nogil=True)
def eigh_batch(a3, out2):
    # out2[b] = [λ ascending ∥ U row-major], eigenvector columns pivot-positive
    n = a3.shape[1]
    for b in range(a3.shape[0]):
        w, v = np.linalg.eigh(lower_sym(a3[b]))
        sg = pivot_signs(v)
        for i in range(n):
            out2[b, i] = w[i]
            for j in range(n):
                out2[b, n + i * n + j] = v[i, j] * sg[j]


@njit(cache=True, nogil=True)
def eigh_backward_batch(f2, b2, n, out3):
    # Ā = sym(U (diag(λ̄) + F∘(UᵀŪ)) Uᵀ), F_ij = 1/(λ_j − λ_i), 0 across gaps <= tol
    for b in range(f2.shape[0]):
        lam = f2[b, :n]
        u = np.ascontiguousarray(f2[b, n:]).reshape((n, n))
        ubar = np.ascontiguousarray(b2[b, n:]).reshape((n, n))
        c = np.ascontiguousarray(u.T) @ ubar
        top = 1.0
        for i in range(n):
            top = max(top, abs(lam[i]))
        tol = top * 1e-9
        mid = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                if i == j:
                    mid[i, j] = b2[b, i]
                else:
                    d = lam[j] - lam[i]
                    if abs(d) > tol:
                        mid[i, j] = c[i, j] / d
        g = (u @ mid) @ np.ascontiguousarray(u.T)
        for i in range(n):
            for j in range(n):
                out3[b, i, j] = 0.5 * (g[i, j] + g[j, i])
'''
