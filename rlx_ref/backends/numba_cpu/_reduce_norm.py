"""Numba source of the normalizations: LayerNorm, RmsNorm, GroupNorm, LayerNorm2d, BatchNorm.

Statistics are two-pass (mean, then Σ(x - mean)²) in f64 for every input dtype: on f32
data it costs nothing next to the memory traffic and makes the variance exact to ~1e-16,
and RmsNorm is the same kernel with the mean fixed at 0. ``norm_blocks`` normalizes
contiguous blocks of ``Cg·S`` elements (a row of LayerNorm over the last axis: Cg = C,
S = 1; a GroupNorm group: C/groups channels × S spatial), the affine channel being
``(block % G)·Cg + element // S``. ``norm_cols`` normalizes along a middle axis of
[outer, C, inner] (LayerNorm on a non-last axis, LayerNorm2d), vectorized over ``inner``.
"""
from __future__ import annotations

# The statistics' accumulator type; the backend's f64 promise for the normalizations rests
# on it (a test moves it to np.float32 to check that conformance notices).
ACC = "np.float64"

SOURCE = '''
_NJ = dict(inline="always", error_model="numpy", cache=True)
# fastmath "contract" only fuses a*b + c into one FMA (one rounding instead of two).
_KJ = dict(cache=True, error_model="numpy", nogil=True, fastmath={"contract"})


# reassoc lets LLVM keep these two sums in vector registers (lanes kept in memory pay a
# store-to-load round trip per vector); nothing else in them can be reordered.
_RJ = dict(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc", "contract"})


@njit(**_RJ)
def _sum(xr):
    s = ACC_T(0.0)
    for i in range(xr.size):
        s += ACC_T(xr[i])
    return s


@njit(**_RJ)
def _sq_dev(xr, mean):
    q = ACC_T(0.0)
    for i in range(xr.size):
        d = ACC_T(ACC_T(xr[i]) - mean)
        q += d * d
    return q


@njit(**_NJ)
def _moments(xr, rms):
    """(mean, biased variance) of the view ``xr`` in ACC_T; RmsNorm: (0, mean square)."""
    n = xr.size
    mean = ACC_T(_sum(xr) / n) if not rms else ACC_T(0.0)
    return mean, _sq_dev(xr, mean) / n
'''

_KERNELS = '''
@njit(**_KJ{par})
def norm_blocks{sfx}(out, x, g, b, G, Cg, S, eps, rms, ntask):
    L = Cg * S
    rows = out.size // L if L else 0
    for t in {rng}(ntask):
        for r in range(t * rows // ntask, (t + 1) * rows // ntask):
            xr = x[r * L:r * L + L]
            orow = out[r * L:r * L + L]
            mean, var = _moments(xr, rms)
            rstd = 1.0 / np.sqrt(var + eps)
            c0 = (r % G) * Cg
            gs = g[c0:c0 + Cg]
            bs = b[c0:c0 + Cg]
            if S == 1:
                for c in range(Cg):
                    orow[c] = (xr[c] - mean) * rstd * gs[c] + bs[c]
            else:
                for c in range(Cg):
                    sc = rstd * gs[c]
                    sh = np.float64(bs[c])
                    xc = xr[c * S:c * S + S]
                    oc = orow[c * S:c * S + S]
                    for s in range(S):
                        oc[s] = (xc[s] - mean) * sc + sh


@njit(**_KJ{par})
def norm_cols{sfx}(out, x, g, b, C, inner, eps, rms, ib):
    nb = (inner + ib - 1) // ib
    outer = out.size // (C * inner) if C * inner else 0
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        base0 = o * C * inner + i0
        mean = np.zeros(w, ACC_T)
        if not rms:
            for c in range(C):
                xs = x[base0 + c * inner:base0 + c * inner + w]
                for i in range(w):
                    mean[i] += xs[i]
            for i in range(w):
                mean[i] /= C
        rstd = np.zeros(w, ACC_T)
        for c in range(C):
            xs = x[base0 + c * inner:base0 + c * inner + w]
            for i in range(w):
                d = ACC_T(xs[i] - mean[i])
                rstd[i] += d * d
        for i in range(w):
            rstd[i] = 1.0 / np.sqrt(rstd[i] / C + eps)
        for c in range(C):
            xs = x[base0 + c * inner:base0 + c * inner + w]
            os = out[base0 + c * inner:base0 + c * inner + w]
            gc = np.float64(g[c])
            bc = np.float64(b[c])
            for i in range(w):
                os[i] = (xs[i] - mean[i]) * rstd[i] * gc + bc


@njit(**_KJ{par})
def batchnorm{sfx}(out, x, g, b, m, v, eps, ntask):
    """y = (x - m[c])·(g[c] / sqrt(v[c] + eps)) + b[c], channels on the last axis."""
    C = g.size
    sc = np.empty(C)
    sh = np.empty(C)
    for c in range(C):
        sc[c] = g[c] / np.sqrt(np.float64(v[c]) + eps)
        sh[c] = m[c]
    rows = out.size // C if C else 0
    for t in {rng}(ntask):
        for r in range(t * rows // ntask, (t + 1) * rows // ntask):
            xr = x[r * C:r * C + C]
            orow = out[r * C:r * C + C]
            for c in range(C):
                orow[c] = (np.float64(xr[c]) - sh[c]) * sc[c] + b[c]
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of the normalization kernels."""
    parts = [SOURCE.replace("ACC_T", ACC)]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(sfx=sfx, rng=rng, par=par).replace("ACC_T", ACC))
    parts.append("norm = norm_blocks\n")
    return "norm", "\n".join(parts)
