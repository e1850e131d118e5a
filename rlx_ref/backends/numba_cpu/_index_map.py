"""Strided copies over per-axis index maps: the kernels behind the movement kinds.

A movement op is a gather ``out[o] = x[src(o)]`` whose source offset sums one term per
output axis: affine (``start + c*stride``, in input elements) or a small table (``-1`` =
the fill value). ``IndexMap`` simplifies the maps on the host (size-1 axes dropped,
row-major-compatible affine axes merged: a Reshape is one memcpy) and launches one of
three kernels: rows (inner run as a slice copy, a broadcast, a reversal or a strided
read; a table's longest contiguous run is copied as a slice), tiled (the last two axes in
tiles of 256-byte rows when the inner axis is strided in the input and the one before is
contiguous: transposes), or block puts (Concat). Elements move as raw bits.
"""
from __future__ import annotations

import math

import numpy as np

from ..layout import strides_of  # noqa: F401 - the movement lowerings read it here
from .kernels import compile_kernel
from .variant_table import th

CHUNK = 1 << 14                 # elements per parallel work item along a long row
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

MOVE_SRC = '''
@njit(inline="always", cache=True)
def _base(r, nouter, dims, starts, strides, toff, tabs):
    # input offset of outer index r over axes 0..nouter-1; -1 when it lands on fill
    base = 0
    for ax in range(nouter - 1, -1, -1):
        d = dims[ax]
        c = r % d
        r //= d
        if toff[ax] < 0:
            base += starts[ax] + c * strides[ax]
        else:
            t = tabs[toff[ax] + c]
            if t < 0:
                return -1
            base += t
    return base


@njit(inline="always", cache=True)
def _affine_run(out, x, o, b, st, j0, j1):
    # out[o + j] = x[b + j*st] for j in [j0, j1); the common strides get their own loop.
    # Offsets are unsigned (modular for negative strides): Numba then drops its negative-
    # index wraparound, which is what keeps these loops from vectorizing.
    if st == 1:
        out[o + j0:o + j1] = x[b + j0:b + j1]
    elif st == 0:
        out[o + j0:o + j1] = x[b]
    elif st == -1:
        uo, ub = np.uint64(o), np.uint64(b)
        for j in range(np.uint64(j0), np.uint64(j1)):
            out[uo + j] = x[ub - j]
    else:
        uo, ub, us = np.uint64(o), np.uint64(b), np.uint64(st)
        for j in range(np.uint64(j0), np.uint64(j1)):
            out[uo + j] = x[ub + j * us]


@njit(inline="always", cache=True)
def _table_run(out, x, o, base, tabs, t0, fill, j0, j1):
    for j in range(j0, j1):
        t = tabs[t0 + j]
        out[np.uint64(o + j)] = fill[0] if t < 0 else x[np.uint64(base + t)]


@njit(inline="always", cache=True)
def _move_row(out, x, dims, starts, strides, toff, tabs, fill, run, r, j0, j1):
    last = dims.size - 1
    o = r * dims[last]
    base = _base(r, last, dims, starts, strides, toff, tabs)
    if base < 0:
        out[o + j0:o + j1] = fill[0]
    elif toff[last] < 0:
        _affine_run(out, x, o, base + starts[last], strides[last], j0, j1)
    else:
        t0 = toff[last]
        lo = min(max(run[0], j0), j1)
        hi = min(max(run[1], lo), j1)
        _table_run(out, x, o, base, tabs, t0, fill, j0, lo)
        if hi > lo:
            _affine_run(out, x, o, base + tabs[t0 + run[0]] - run[0], 1, lo, hi)
        _table_run(out, x, o, base, tabs, t0, fill, hi, j1)


@njit(cache=True, nogil=True)
def move(out, x, dims, starts, strides, toff, tabs, fill, run, chunk):
    n = dims[dims.size - 1]
    for r in range(out.size // n):
        _move_row(out, x, dims, starts, strides, toff, tabs, fill, run, r, 0, n)


@njit(cache=True, nogil=True, parallel=True)
def move_par(out, x, dims, starts, strides, toff, tabs, fill, run, chunk):
    n = dims[dims.size - 1]
    per_row = (n + chunk - 1) // chunk
    for w_ in prange(out.size // n * per_row):
        w = np.int64(w_)      # prange counts in uint64
        r = w // per_row
        j0 = (w % per_row) * chunk
        _move_row(out, x, dims, starts, strides, toff, tabs, fill, run, r, j0,
                  min(j0 + chunk, n))


@njit(cache=True, nogil=True, parallel=True)
def move_tiled(out, x, dims, starts, strides, toff, tabs, fill, run, tile):
    # last two axes (P, L) affine, P contiguous in x, L strided: copy tile by tile
    nd = dims.size
    p_n, l_n = dims[nd - 2], dims[nd - 1]
    sp, sl = strides[nd - 2], strides[nd - 1]
    npb = (p_n + tile - 1) // tile
    for w_ in prange(out.size // (p_n * l_n) * npb):
        w = np.int64(w_)      # prange counts in uint64
        r = w // npb
        p0 = w % npb * tile
        p1 = min(p0 + tile, p_n)
        o = r * p_n * l_n
        base = _base(r, nd - 2, dims, starts, strides, toff, tabs)
        if base < 0:
            out[o + p0 * l_n:o + p1 * l_n] = fill[0]
        else:
            b = base + starts[nd - 2] + starts[nd - 1]
            usl = np.uint64(sl)
            for l0 in range(0, l_n, tile):
                l1 = min(l0 + tile, l_n)
                for p in range(p0, p1):
                    q = np.uint64(o + p * l_n)
                    s = np.uint64(b + p * sp)
                    for j in range(np.uint64(l0), np.uint64(l1)):
                        out[q + j] = x[s + j * usl]


@njit(cache=True, nogil=True)
def put_rows(out, x, rows, n, dst_stride, dst_off, chunk):
    # row r of x (n elements) goes to out[r*dst_stride + dst_off:][:n] (Concat)
    for r in range(rows):
        out[r * dst_stride + dst_off:r * dst_stride + dst_off + n] = x[r * n:(r + 1) * n]


@njit(cache=True, nogil=True, parallel=True)
def put_rows_par(out, x, rows, n, dst_stride, dst_off, chunk):
    per_row = (n + chunk - 1) // chunk
    for w_ in prange(rows * per_row):
        w = np.int64(w_)      # prange counts in uint64
        r = w // per_row
        j0 = w % per_row * chunk
        j1 = min(j0 + chunk, n)
        o = r * dst_stride + dst_off
        out[o + j0:o + j1] = x[r * n + j0:r * n + j1]


@njit(inline="always", cache=True)
def _trilu_row(out, x, r, rows, cols, upper, diag):
    # keep j - i >= diag (upper) or j - i <= diag (lower); the rest is exactly 0
    i = r % rows
    o = r * cols
    cut = min(max(i + diag + (0 if upper else 1), 0), cols)
    if upper:
        out[o:o + cut] = 0
        out[o + cut:o + cols] = x[o + cut:o + cols]
    else:
        out[o:o + cut] = x[o:o + cut]
        out[o + cut:o + cols] = 0


@njit(cache=True, nogil=True)
def trilu(out, x, nrows, rows, cols, upper, diag):
    for r in range(nrows):
        _trilu_row(out, x, r, rows, cols, upper, diag)


@njit(cache=True, nogil=True, parallel=True)
def trilu_par(out, x, nrows, rows, cols, upper, diag):
    for r_ in prange(nrows):
        r = np.int64(r_)      # prange counts in uint64
        _trilu_row(out, x, r, rows, cols, upper, diag)
'''

_KERNEL = None


def kernel():
    """The movement kernel module (compiled once per process, cached on disk)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = compile_kernel("move", MOVE_SRC)
    return _KERNEL


def uint_name(itemsize: int) -> str:
    """Source name of the unsigned type elements of ``itemsize`` bytes move as (the
    ``bits`` view inside compiled code)."""
    return f"np.{_UINT[itemsize].__name__}"


def bits(a: np.ndarray) -> np.ndarray:
    """A flat unsigned-integer view of a C-contiguous array (elements as raw bits)."""
    return a.reshape(-1).view(_UINT[a.dtype.itemsize])


# ── axis maps: ("affine", start, stride) or ("table", int64 array; -1 = fill) ──────

def affine(start: int, stride: int):
    return ("affine", int(start), int(stride))


def table(values) -> tuple:
    return ("table", np.asarray(values, np.int64))


def _value(m, c: int) -> int:
    return m[1] + c * m[2] if m[0] == "affine" else int(m[1][c])


def _simplify(dims: list, maps: list):
    """Drop size-1 axes (folding their offset) and merge row-major-compatible affine axes.

    Returns (dims, maps, all_fill)."""
    offset, kd, km = 0, [], []
    for d, m in zip(dims, maps):
        if d == 1:
            v = _value(m, 0)
            if v < 0:
                return dims, maps, True
            offset += v
            continue
        if m[0] == "table":
            t = m[1]
            if (t >= 0).all() and (np.diff(t) == t[1] - t[0]).all():
                m = affine(t[0], t[1] - t[0])
        if km and km[-1][0] == "affine" and m[0] == "affine" and km[-1][2] == m[2] * d:
            km[-1] = affine(km[-1][1] + m[1], m[2])
            kd[-1] *= d
            continue
        kd.append(d)
        km.append(m)
    if not kd:
        kd, km = [1], [affine(0, 0)]
    m = km[0]
    km[0] = affine(m[1] + offset, m[2]) if m[0] == "affine" else \
        table(np.where(m[1] < 0, -1, m[1] + offset))
    return kd, km, False


def _longest_run(t: np.ndarray) -> tuple:
    """[lo, hi) of the longest stretch of a table that reads consecutive input elements."""
    ok = (t[1:] == t[:-1] + 1) & (t[:-1] >= 0)
    edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not starts.size:
        return 0, 0
    k = int(np.argmax(ends - starts))
    return int(starts[k]), int(ends[k]) + 1


class IndexMap:
    """A planned strided gather ``out[o] = x[src(o)]``: call it with (out, x)."""

    def __init__(self, out_dims, maps, fill=None):
        self.size = math.prod(out_dims)
        self.fill = fill
        if self.size == 0:
            return                      # nothing to move (and tables may be empty)
        dims, maps, self.all_fill = _simplify(list(out_dims), list(maps))
        self.dims = np.array(dims, np.int64)
        self.starts = np.array([m[1] if m[0] == "affine" else 0 for m in maps], np.int64)
        self.strides = np.array([m[2] if m[0] == "affine" else 0 for m in maps], np.int64)
        toff, tabs, at = [], [], 0
        for m in maps:
            toff.append(at if m[0] == "table" else -1)
            if m[0] == "table":
                tabs.append(m[1])
                at += m[1].size
        self.toff = np.array(toff, np.int64)
        self.tabs = np.concatenate(tabs) if tabs else np.zeros(1, np.int64)
        last = maps[-1]
        self.run = np.array(_longest_run(last[1]) if last[0] == "table" else (0, 0), np.int64)
        self.tiled = (len(maps) >= 2 and last[0] == "affine" and abs(last[2]) > 1 and
                      maps[-2][0] == "affine" and abs(maps[-2][2]) == 1)
        # read at planning, where a compile's thresholds are in force
        self.par_bytes = th("move.par_bytes")

    def __call__(self, out: np.ndarray, x: np.ndarray) -> None:
        if self.size == 0:
            return
        o = bits(out)
        fill = np.zeros(1, o.dtype) if self.fill is None else bits(self.fill)
        if self.all_fill:
            o[:] = fill[0]
            return
        fn, last = self._kernel(out.nbytes, out.itemsize)
        fn(o, bits(x), self.dims, self.starts, self.strides, self.toff, self.tabs, fill,
           self.run, last)

    def _kernel(self, nbytes: int, itemsize: int):
        """(kernel, its last argument) for an output of ``nbytes``."""
        k = kernel()
        if nbytes < self.par_bytes:
            return k.fn, CHUNK
        if self.tiled:
            return k.get("move_tiled"), max(32, 256 // itemsize)
        return k.get("move_par"), CHUNK

    def variant(self, nbytes: int) -> str | None:
        """The variant that moves an output of ``nbytes`` (None: nothing to move)."""
        if self.size == 0 or self.all_fill:
            return None
        if nbytes < self.par_bytes:
            return "move.serial"
        return "transpose.tiled" if self.tiled else "move.par"

    def jit(self, dtype: np.dtype):
        """The same move as a ``JitCall`` (None when there is nothing to move or only the
        fill to write, which the host does)."""
        from .lowering import JitCall

        if self.size == 0 or self.all_fill:
            return None
        u = uint_name(dtype.itemsize)
        fill = np.zeros(1, _UINT[dtype.itemsize]) if self.fill is None else bits(self.fill)
        fn, last = self._kernel(self.size * dtype.itemsize, dtype.itemsize)
        return JitCall(fn, (f"{{out}}.reshape(-1).view({u})", f"{{0}}.reshape(-1).view({u})"),
                       (self.dims, self.starts, self.strides, self.toff, self.tabs, fill,
                        self.run, last))
