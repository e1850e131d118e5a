"""Numba source of Softmax over [outer, K, inner], in f32 or f64 working precision.

Numba calls scalar libm for ``exp`` (no SVML in this llvmlite), so every exp here is the
branch-free ``_vexpf_le0`` (f32 work) or ``_vexp`` (f64) of ``_vmath``, which the loop
vectorizer accepts. A row (``inner == 1``) takes four passes: the max over 64 lanes (NaN
mapped to +inf, so one max also flags NaN), the exps written into the output row (its
read-for-ownership misses then overlap the exp arithmetic: through an L1 scratch row and
one copy out at the end, 1.2x slower single-threaded at 4096²), their sum, and the
scaling by 1/sum in the output dtype, both on the row in cache. The sum has fastmath
``reassoc`` (vector accumulators in registers); the exp must not be reassociated: its
range reduction depends on the order of its operations. Rows holding NaN or +inf, or all
-inf, are NaN (as ``x - max`` is in the oracle). A middle-axis softmax (``inner > 1``)
vectorizes over ``inner``.
"""
from __future__ import annotations

from ._vmath import VMATH

_CONSTS = {"f32": {"ct": "np.float32", "exp": "_vexpf_le0"},
           "f64": {"ct": "np.float64", "exp": "_vexp"}}

_HEAD = '''
# fastmath "contract" only lets LLVM fuse a*b + c into one FMA (one rounding instead of two)
_KJ = dict(cache=True, error_model="numpy", nogil=True, fastmath={{"contract"}})
CT = {ct}
INF = CT(np.inf)                        # typed: an f64 constant would widen the f32 max lanes


@njit(inline="always", error_model="numpy", cache=True)
def _row_max(xr, ml):
    """max of the row view ``xr`` with NaN counted as +inf; 64 lanes."""
    nb = xr.size // 64
    m = -np.inf
    if nb:                              # short rows skip the lanes entirely
        for j in range(64):
            ml[j] = -INF
        for i in range(nb):
            xs = xr[i * 64:i * 64 + 64]
            for j in range(64):
                v = xs[j]
                # fmax stores every lane (a select here became a slow masked store)
                ml[j] = np.fmax(ml[j], v if v == v else INF)
        for j in range(64):
            m = max(m, ml[j])
    tail = xr[nb * 64:]
    for i in range(tail.size):
        v = tail[i]
        m = max(m, v if v == v else np.inf)
    return m


@njit(**_KJ)
def _exp_row(orow, xr, m):
    # a function of its own: inlined into the row loop, the exp's constants no longer fit
    # in registers beside the loop's state and are reloaded every vector (1.5x slower)
    for k in range(xr.size):
        orow[k] = {exp}(CT(xr[k]) - m)


@njit(cache=True, error_model="numpy", nogil=True, fastmath={{"reassoc"}})
def _row_sum(r):
    # sum of the exps (positive, at most 1) in the row's dtype: reassoc keeps 32 f32 lanes
    # in registers, each adding K/32 terms, a relative error below (K/32 + 5)·eps, well
    # inside the contract's 2·eps·K (an f64 sum costs 6% more time)
    s = r.dtype.type(0)
    for k in range(r.size):
        s += r[k]
    return np.float64(s)
'''

_KERNELS = '''
@njit(**_KJ{par})
def {name}_rows{sfx}(out, x, K, ntask):
    outer = out.size // K if K else 0
    for t in {rng}(ntask):
        ml = np.empty(64, x.dtype)
        for o in range(t * outer // ntask, (t + 1) * outer // ntask):
            xr = x[o * K:o * K + K]
            orow = out[o * K:o * K + K]
            m = _row_max(xr, ml)
            if m == np.inf or m == -np.inf:
                for k in range(K):
                    orow[k] = np.nan
                continue
            _exp_row(orow, xr, CT(m))
            # 1/sum rounded to the output dtype: an f32 product is 8 lanes, not 4 (the
            # extra rounding is far inside the contract's 2·eps·K·max budget)
            inv = orow.dtype.type(1.0 / _row_sum(orow))
            for k in range(K):
                orow[k] = orow[k] * inv


@njit(**_KJ{par})
def {name}_cols{sfx}(out, x, K, inner, ib):
    nb = (inner + ib - 1) // ib
    outer = out.size // (K * inner) if K * inner else 0
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        m = np.full(w, -INF)
        s = np.zeros(w)
        for k in range(K):
            xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                v = xs[i]
                m[i] = np.fmax(m[i], v if v == v else INF)
        for k in range(K):
            xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            os = out[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                os[i] = {exp}(CT(xs[i]) - CT(m[i]))
                s[i] += os[i]
        for i in range(w):
            s[i] = np.nan if m[i] == np.inf or m[i] == -np.inf else 1.0 / s[i]
        for k in range(K):
            os = out[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                os[i] = np.float64(os[i]) * s[i]
'''


def source(work: str) -> tuple[str, str]:
    """(kernel name, Numba source) of Softmax computed in ``work`` ("f32" or "f64")."""
    c = _CONSTS[work]
    name = f"softmax_{work}"
    parts = [VMATH, _HEAD.format(**c)]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(name=name, sfx=sfx, rng=rng, par=par, **c))
    parts.append(f"{name} = {name}_rows\n")
    return name, "\n".join(parts)
