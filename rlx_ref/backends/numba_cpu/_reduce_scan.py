"""Numba source of the running scans (Cumsum, CumProd, CumMax) over [outer, K, inner].

One module per kind: ``_c`` combines the running value with the next element, pasted
above shared kernels. Float sums and products run in f64 (an f32 running sum drifts ~1e-16, not
K·1e-7), integers in i64 and wrap when stored. A row scan is bound by the latency of
its combine (one dependent add per element); interleaving rows was tried and lost to
L1 set conflicts (rows 16 KiB apart share a set). Scans over a middle axis vectorize
over ``inner``.
"""
from __future__ import annotations

_OPS = {
    "Cumsum": "return a + v",
    "CumProd": "return a * v",
    # np.maximum.accumulate after NaN -> -inf: the new element wins ties (±0 included)
    "CumMax": "if v != v:\n        return a\n    return a if a > v else v",
}

_SOURCE = '''
_NJ = dict(inline="always", error_model="numpy", cache=True)
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_NJ)
def _c(a, v):
    {comb}
'''

_KERNELS = '''
@njit(**_KJ{par})
def {name}_rows{sfx}(out, x, K, init, excl, ntask):
    """Scan each contiguous row; ``ntask`` ranges of rows."""
    outer = out.size // K if K else 0
    for t in {rng}(ntask):
        for o in range(t * outer // ntask, (t + 1) * outer // ntask):
            xr = x[o * K:o * K + K]
            orow = out[o * K:o * K + K]
            a = init
            if excl:
                for k in range(K):
                    orow[k] = a
                    a = _c(a, xr[k])
            else:
                for k in range(K):
                    a = _c(a, xr[k])
                    orow[k] = a


@njit(**_KJ{par})
def {name}_cols{sfx}(out, x, K, inner, init, excl, ib):
    """Scan along k of [outer, K, inner], ``ib`` columns per task (vectorized over i)."""
    nb = (inner + ib - 1) // ib
    outer = out.size // (K * inner) if K * inner else 0
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        acc = np.full(w, init)
        for k in range(K):
            base = (o * K + k) * inner + i0
            xs = x[base:base + w]
            os = out[base:base + w]
            if excl:
                for i in range(w):
                    os[i] = acc[i]
                    acc[i] = _c(acc[i], xs[i])
            else:
                for i in range(w):
                    acc[i] = _c(acc[i], xs[i])
                    os[i] = acc[i]
'''


def source(kind: str) -> tuple[str, str]:
    """(kernel name, Numba source) of the scan ``kind``."""
    name = kind.lower()
    parts = [_SOURCE.format(comb=_OPS[kind])]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(name=name, sfx=sfx, rng=rng, par=par))
    parts.append(f"{name} = {name}_rows\n")
    return name, "\n".join(parts)
