"""Numba source of the gather/scatter kernels (indices already decoded to int64 offsets).

Gathers move raw bits (any dtype); scatters combine values (``red``: 0 None, 1 Add,
2 Mul, 3 Max, 4 Min; Max/Min are numpy's NaN-ignoring fmax/fmin) in row-major update
order, so duplicate targets behave as the oracle's sequential ``ufunc.at``. The parallel
scatter splits the trailing slice, never the update order.

Contiguous runs move through ``_copy``, a loop over views indexed from 0 that LLVM turns
into a vector copy. Numba's slice assignment (``out[a:b] = x[c:d]``) runs a generic
strided element loop instead: one thread gathering 8192 rows of 4 KiB took 6 ms with it,
3 ms with ``_copy`` (numpy's contiguous copy of the same 32 MiB: 2.9 ms). The parallel
gathers split long rows into ``piece``-element work items so a few rows still feed every
thread.
"""
from __future__ import annotations

from .kernels import compile_kernel

INDEX_SRC = '''
@njit(inline="always", cache=True)
def _combine(a, b, red):
    if red == 0:
        return b
    if red == 1:
        return a + b
    if red == 2:
        return a * b
    if red == 3:
        if b != b:
            return a
        if a != a:
            return b
        return a if a >= b else b
    if b != b:
        return a
    if a != a:
        return b
    return a if a <= b else b


@njit(inline="always", cache=True)
def _copy(out, o, x, s, n):
    # out[o:o+n] = x[s:s+n]; 0-based views spare the negative-index wraparound, so the
    # loop vectorizes
    d = out[o:o + n]
    v = x[s:s + n]
    for j in range(n):
        d[j] = v[j]


@njit(cache=True, nogil=True)
def take_rows(out, x, idx, outer, n_axis, inner, piece):
    # out [outer, K, inner] = x [outer, n_axis, inner] rows idx (Gather)
    k = idx.size
    for w in range(outer * k):
        _copy(out, w * inner, x, (w // k * n_axis + idx[w % k]) * inner, inner)


@njit(cache=True, nogil=True, parallel=True)
def take_rows_par(out, x, idx, outer, n_axis, inner, piece):
    # work item t: elements [j0, j0 + piece) of output row t // npc
    k = idx.size
    npc = (inner + piece - 1) // piece
    for t_ in prange(outer * k * npc):
        t = np.int64(t_)      # prange counts in uint64
        w = t // npc
        j0 = t % npc * piece
        src = (w // k * n_axis + idx[w % k]) * inner
        _copy(out, w * inner + j0, x, src + j0, min(piece, inner - j0))


@njit(inline="always", cache=True)
def _nd_offset(idx, q, kk, per_batch, batch_stride, dstrides):
    off = q // per_batch * batch_stride
    for t in range(kk):
        off += idx[q * kk + t] * dstrides[t]
    return off


@njit(cache=True, nogil=True)
def take_nd(out, x, idx, kk, per_batch, batch_stride, dstrides, inner, piece):
    # row q of out = the data slice the q-th index tuple selects (GatherNd)
    for q in range(idx.size // kk):
        off = _nd_offset(idx, q, kk, per_batch, batch_stride, dstrides)
        _copy(out, q * inner, x, off, inner)


@njit(cache=True, nogil=True, parallel=True)
def take_nd_par(out, x, idx, kk, per_batch, batch_stride, dstrides, inner, piece):
    npc = (inner + piece - 1) // piece
    for t_ in prange(idx.size // kk * npc):
        t = np.int64(t_)      # prange counts in uint64
        q = t // npc
        j0 = t % npc * piece
        off = _nd_offset(idx, q, kk, per_batch, batch_stride, dstrides)
        _copy(out, q * inner + j0, x, off + j0, min(piece, inner - j0))


@njit(cache=True)
def _elem_offset(p, idx, idims, dstrides, axis):
    # the data offset of position p with its `axis` coordinate replaced by idx[p]
    off = 0
    r = p
    for ax in range(idims.size - 1, -1, -1):
        d = idims[ax]
        c = r % d
        r //= d
        off += (idx[p] if ax == axis else c) * dstrides[ax]
    return off


@njit(cache=True, nogil=True)
def take_elements(out, x, idx, idims, dstrides, axis):
    for p in range(out.size):
        out[p] = x[_elem_offset(p, idx, idims, dstrides, axis)]


@njit(cache=True, nogil=True, parallel=True)
def take_elements_par(out, x, idx, idims, dstrides, axis):
    for p_ in prange(out.size):
        p = np.int64(p_)      # prange counts in uint64
        out[p] = x[_elem_offset(p, idx, idims, dstrides, axis)]


@njit(cache=True, nogil=True)
def scatter_nd(out, data, zero, upd, idx, kk, dstrides, inner, red):
    # out = data (or zeros); slice u of upd combines into the slice tuple u selects
    if zero:
        out[:] = 0
    else:
        _copy(out, 0, data, 0, out.size)
    for u in range(idx.size // kk):
        off = _nd_offset(idx, u, kk, 1 << 62, 0, dstrides)
        for j in range(inner):
            out[off + j] = _combine(out[off + j], upd[u * inner + j], red)


@njit(cache=True, nogil=True, parallel=True)
def scatter_nd_par(out, data, zero, upd, idx, kk, dstrides, inner, red, chunk):
    n = out.size
    for c_ in prange((n + chunk - 1) // chunk):
        c = np.int64(c_)      # prange counts in uint64
        hi = min(c * chunk + chunk, n)
        if zero:
            out[c * chunk:hi] = 0
        else:
            _copy(out, c * chunk, data, c * chunk, hi - c * chunk)
    for c_ in prange((inner + chunk - 1) // chunk):
        c = np.int64(c_)      # prange counts in uint64
        j0 = c * chunk
        j1 = min(j0 + chunk, inner)
        for u in range(idx.size // kk):
            off = _nd_offset(idx, u, kk, 1 << 62, 0, dstrides)
            for j in range(j0, j1):
                out[off + j] = _combine(out[off + j], upd[u * inner + j], red)


@njit(cache=True, nogil=True)
def scatter_elements(out, data, upd, idx, idims, dstrides, axis, red):
    _copy(out, 0, data, 0, out.size)
    for p in range(upd.size):
        off = _elem_offset(p, idx, idims, dstrides, axis)
        out[off] = _combine(out[off], upd[p], red)
'''

_KERNEL = None


def kernel():
    """The gather/scatter kernel module (compiled once per process, cached on disk)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = compile_kernel("take_rows", INDEX_SRC)
    return _KERNEL
