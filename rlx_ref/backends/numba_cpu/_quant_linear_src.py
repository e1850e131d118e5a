"""Numba source of the 4-operand DequantMatMul: ``out[m, n] = x[m, k] · W[k, n]`` with each
weight decoded from ``w_q``, ``scale`` and ``zp`` inside the K loop.

The decode is the scheme records' own (``rlx_ref.quant.linear.unpack_linear``), bit for
bit: codes at the flat index ``e = p·n + j`` of the row-major ``[k, n]`` weight (4-bit
codes: byte ``e >> 1``, low nibble for even e), scales per block of ``bs`` rows along k
(``[ceil(k/bs), n]``; FP8: one block spanning k), every f32 product in the record's order.
FP8, E2M1 and NVFP4 block-scale values come from the record's own tables (``tab``,
``stab``), passed in as arrays. Threads own panels of ``cols`` columns: for each k the
panel's weights are decoded once into a row scratch, then added into every x row's output.
"""
from __future__ import annotations

_KERNEL = '''
@njit(cache=True, nogil=True)
def _nib(wq, e):
    b = np.int64(wq[e >> 1])
    return (b >> 4) if e & 1 else (b & 15)


@njit(cache=True, nogil=True)
def _panel(out, x, wq, sc, zp, tab, stab, k, bs, j0, j1, wrow):
    # out[:, j0:j1] = x @ W[:, j0:j1], W decoded a row of the panel at a time
    m = x.shape[0]
    n = out.shape[1]
    for i in range(m):
        for j in range(j0, j1):
            out[i, j] = 0
    for p in range(k):
        bi = p // bs
        for j in range(j0, j1):
            e = p * n + j
            si = bi * n + j
            $decode
            wrow[j - j0] = w
        for i in range(m):
            xv = x[i, p]
            row = out[i]
            for j in range(j0, j1):
                row[j] += xv * wrow[j - j0]


@njit(cache=True, nogil=True, parallel=True)
def qlin(out, x, wq, sc, zp, tab, stab, k, bs, cols):
    n = out.shape[1]
    panels = (n + cols - 1) // cols
    for t in prange(panels):
        wrow = np.empty(cols, np.float32)
        j0 = t * cols
        _panel(out, x, wq, sc, zp, tab, stab, k, bs, j0, min(n, j0 + cols), wrow)
'''

# per scheme: the weight ``w`` of element e (scale index si), as the record computes it
DECODE = {
    "Int8Block": "w = np.float32(wq[e]) * sc[si]",
    "Int8BlockAsym": "w = (np.float32(wq[e]) - zp[si]) * sc[si]",
    "Int4Block": "u = _nib(wq, e)\n            w = np.float32(u - 16 if u > 7 else u) * sc[si]",
    "Fp8E4m3": "w = tab[wq[e]] * sc[j]",
    "Fp8E5m2": "w = tab[wq[e]] * sc[j]",
    # e2m1 * e4m3 is exact in f32; the one rounding is the global scale's
    "Nvfp4Block": "w = (tab[_nib(wq, e)] * stab[sc[si]]) * zp[0]",
}
SCHEMES = tuple(DECODE)


def linear_source(scheme: str) -> str:
    """The kernel module source (function ``qlin``) of ``scheme`` (a key of DECODE)."""
    return _KERNEL.replace("$decode", DECODE[scheme])
