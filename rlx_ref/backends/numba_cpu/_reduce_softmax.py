"""Numba source of Softmax over [outer, K, inner], in f32 or f64 working precision.

Numba calls scalar libm for ``exp`` (no SVML in this llvmlite), which caps a row softmax
at numpy's speed. The row kernel therefore computes ``exp`` itself in a form the loop
vectorizer accepts: Cody-Waite range reduction ``d = n·ln2 + r``, a Taylor polynomial
for ``e^r`` (degree 7 in f32, 13 in f64: below 1 ulp of truncation error), and ``2^n``
built as exponent bits in an integer scratch row read back through a float view. The
max and the sum use 64 order-preserving lanes; the sum is f64 and the final division
is f64, so an f32 result is rounded once. Rows holding NaN or +inf, or all -inf, are NaN
(as ``x - max`` is in the oracle). A middle-axis softmax (``inner > 1``) vectorizes over
``inner`` and calls ``math.exp``.
"""
from __future__ import annotations

_CONSTS = {
    "f32": {"ct": "np.float32", "it": "np.int32", "log2e": "1.4426950408889634",
            "ln2_hi": "0.693359375", "ln2_lo": "-2.12194440e-4", "shift": "12582912.0",
            "lo": "-87.0", "bias": "127", "mbits": "23", "degree": 7},
    "f64": {"ct": "np.float64", "it": "np.int64", "log2e": "1.4426950408889634",
            "ln2_hi": "6.93147180369123816490e-01", "ln2_lo": "1.90821492927058770002e-10",
            "shift": "6755399441055744.0", "lo": "-708.0", "bias": "1023", "mbits": "52",
            "degree": 13},
}

_HEAD = '''
# fastmath "contract" only lets LLVM fuse a*b + c into one FMA (one rounding instead of two):
# it halves the exp polynomial's dependency chain and reassociates nothing. n is computed
# once per element, so the polynomial and the exponent bits always agree.
_KJ = dict(cache=True, error_model="numpy", nogil=True, fastmath={{"contract"}})
CT = {ct}
IT = {it}
LOG2E = CT({log2e})
LN2_HI = CT({ln2_hi})
LN2_LO = CT({ln2_lo})
SHIFT = CT({shift})
LO = CT({lo})
ZERO = CT(0.0)
{coefs}


@njit(inline="always", error_model="numpy", cache=True)
def _poly(r):
    return {horner}


@njit(inline="always", error_model="numpy", cache=True)
def _max_nan(xr, ml, nl):
    """(max of the non-NaN values, number of NaN) of the row view ``xr``; 64 lanes."""
    nb = xr.size // 64
    m = -np.inf
    bad = 0
    if nb:                              # short rows skip the lanes entirely
        for j in range(64):
            ml[j] = -np.inf
            nl[j] = 0
        for i in range(nb):
            xs = xr[i * 64:i * 64 + 64]
            for j in range(64):
                v = xs[j]
                ml[j] = np.fmax(ml[j], v)
                nl[j] += v != v
        for j in range(64):
            m = np.fmax(m, ml[j])
            bad += nl[j]
    tail = xr[nb * 64:]
    for i in range(tail.size):
        v = tail[i]
        m = np.fmax(m, v)
        bad += v != v
    return m, bad
'''

_KERNELS = '''
@njit(**_KJ{par})
def {name}_rows{sfx}(out, x, K, ntask):
    outer = out.size // K if K else 0
    for t in {rng}(ntask):
        e = np.empty(K, CT)
        bits = np.empty(K, IT)
        two = bits.view(CT)          # 2^n, written as exponent bits
        lanes = np.zeros(64)
        ml = np.empty(64, x.dtype)
        nl = np.empty(64, np.int64)
        for o in range(t * outer // ntask, (t + 1) * outer // ntask):
            xr = x[o * K:o * K + K]
            orow = out[o * K:o * K + K]
            m, bad = _max_nan(xr, ml, nl)
            if bad or m == np.inf or m == -np.inf:
                for k in range(K):
                    orow[k] = np.nan
                continue
            mc = CT(m)
            for k in range(K):
                d0 = CT(xr[k]) - mc
                d = d0 if d0 > LO else LO
                nf = (d * LOG2E + SHIFT) - SHIFT
                r = (d - nf * LN2_HI) - nf * LN2_LO
                p = _poly(r)
                e[k] = p if d0 >= LO else ZERO
                bits[k] = (IT(nf) + {bias}) << {mbits}
            nb = K // 64
            s = 0.0
            if nb:
                for j in range(64):
                    lanes[j] = 0.0
                for i in range(nb):
                    es = e[i * 64:i * 64 + 64]
                    ts = two[i * 64:i * 64 + 64]
                    for j in range(64):
                        w = es[j] * ts[j]
                        es[j] = w
                        lanes[j] += w
                for j in range(64):
                    s += lanes[j]
            for k in range(nb * 64, K):
                w = e[k] * two[k]
                e[k] = w
                s += w
            inv = 1.0 / s             # f64: one more rounding far below the output's
            for k in range(K):
                orow[k] = np.float64(e[k]) * inv


@njit(**_KJ{par})
def {name}_cols{sfx}(out, x, K, inner, ib):
    nb = (inner + ib - 1) // ib
    outer = out.size // (K * inner) if K * inner else 0
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        m = np.full(w, -np.inf)
        bad = np.zeros(w, np.int64)
        s = np.zeros(w)
        for k in range(K):
            xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                v = xs[i]
                m[i] = np.fmax(m[i], v)
                bad[i] += v != v
        for i in range(w):
            if m[i] == np.inf or m[i] == -np.inf:
                bad[i] += 1
        for k in range(K):
            xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            os = out[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                os[i] = math.exp(np.float64(CT(xs[i]) - CT(m[i])))
                s[i] += os[i]
        for i in range(w):
            s[i] = np.nan if bad[i] else 1.0 / s[i]
        for k in range(K):
            os = out[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                os[i] = np.float64(os[i]) * s[i]
'''


def _horner(degree: int) -> tuple[str, str]:
    coefs = "\n".join(f"C{j} = CT(1.0 / {_fact(j)})" for j in range(degree + 1))
    expr = f"C{degree}"
    for j in range(degree - 1, -1, -1):
        expr = f"C{j} + r * ({expr})"
    return coefs, expr


def _fact(n: int) -> int:
    out = 1
    for j in range(2, n + 1):
        out *= j
    return out


def source(work: str) -> tuple[str, str]:
    """(kernel name, Numba source) of Softmax computed in ``work`` ("f32" or "f64")."""
    c = _CONSTS[work]
    coefs, horner = _horner(c["degree"])
    name = f"softmax_{work}"
    parts = [_HEAD.format(coefs=coefs, horner=horner, **c)]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(name=name, sfx=sfx, rng=rng, par=par, **c))
    parts.append(f"{name} = {name}_rows\n")
    return name, "\n".join(parts)
