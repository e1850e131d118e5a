"""Numba source of the index-valued reductions: ArgMax/ArgMin and TopK.

ArgMax (ArgMin) keeps the first strictly larger (smaller) non-NaN value, so ties give the
lowest index, -0 and +0 tie, and a slice whose element 0 is NaN gives 0: RLX's scan from
element 0, which no later value beats when it is NaN. TopK ranks (value descending, index
ascending) with NaN below every number: small k keeps a sorted buffer of k candidates per row (one pass,
insertion only when an element beats the k-th); large k runs a stable bottom-up merge
sort of the row's indices. Indices are stored in the output's dtype (f32-encoded or i64).
"""
from __future__ import annotations

SMALL_K = 32             # up to this k, a candidate buffer beats sorting the row

SOURCE = '''
_NJ = dict(inline="always", error_model="numpy", cache=True)
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_NJ)
def _wins(v, best, largest):
    if largest:
        return v > best
    return v < best


@njit(**_NJ)
def _above(a, b):
    """a ranks above b in TopK order (NaN ranks below everything; equal: neither)."""
    if a != a:
        return False
    if b != b:
        return True
    return a > b
'''

_KERNELS = '''
@njit(**_KJ{par})
def arg_rows{sfx}(out, x, K, largest):
    for o in {rng}(out.size):
        xr = x[o * K:o * K + K]
        best = xr[0]
        idx = -1
        for k in range(K):
            v = xr[k]
            if v == v and (idx < 0 or _wins(v, best, largest)):
                best = v
                idx = k
        out[o] = idx if idx >= 0 and xr[0] == xr[0] else 0     # NaN at 0 is never beaten


@njit(**_KJ{par})
def arg_cols{sfx}(out, x, K, inner, largest, ib):
    nb = (inner + ib - 1) // ib
    outer = out.size // inner
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        best = np.empty(w, x.dtype)
        idx = np.full(w, -1)
        for k in range(K):
            xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]
            for i in range(w):
                v = xs[i]
                if v == v and (idx[i] < 0 or _wins(v, best[i], largest)):
                    best[i] = v
                    idx[i] = k
        dst = out[o * inner + i0:o * inner + i0 + w]
        x0 = x[o * K * inner + i0:o * K * inner + i0 + w]
        for i in range(w):
            dst[i] = idx[i] if idx[i] >= 0 and x0[i] == x0[i] else 0


@njit(**_KJ{par})
def topk_rows{sfx}(out, x, n, k):
    outer = out.size // k
    for o in {rng}(outer):
        xr = x[o * n:o * n + n]
        if k <= {small}:
            vals = np.empty(k, x.dtype)
            idx = np.empty(k, np.int64)
            cnt = 0
            for j in range(n):
                v = xr[j]
                if cnt == k:
                    if not _above(v, vals[k - 1]):
                        continue
                    p = k - 1
                else:
                    p = cnt
                    cnt += 1
                while p > 0 and _above(v, vals[p - 1]):
                    vals[p] = vals[p - 1]
                    idx[p] = idx[p - 1]
                    p -= 1
                vals[p] = v
                idx[p] = j
        else:
            idx = _sorted_indices(xr)
        for j in range(k):
            out[o * k + j] = idx[j]
'''

_SORT = '''
@njit(**_KJ)
def _sorted_indices(xr):
    """Indices of the row ``xr`` in TopK order: a stable bottom-up merge sort."""
    n = xr.size
    src = np.arange(n)
    dst = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, p = lo, mid, lo
            while i < mid and j < hi:
                # take from the right run only when it ranks strictly above: stable
                if _above(xr[src[j]], xr[src[i]]):
                    dst[p] = src[j]
                    j += 1
                else:
                    dst[p] = src[i]
                    i += 1
                p += 1
            while i < mid:
                dst[p] = src[i]
                i += 1
                p += 1
            while j < hi:
                dst[p] = src[j]
                j += 1
                p += 1
        src, dst = dst, src
        width *= 2
    return src
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of ArgMax/ArgMin and TopK."""
    parts = [SOURCE, _SORT]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(sfx=sfx, rng=rng, par=par, small=SMALL_K))
    parts.append("select = arg_rows\n")
    return "select", "\n".join(parts)
