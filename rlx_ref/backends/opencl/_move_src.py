"""OpenCL C of the movement kernels, and the index maps and work split they run over.

Movement copies raw bits, so kernels are keyed by element size only (``uchar`` .. ``ulong2``
for 1..16 bytes): f16, bf16, bool and complex need nothing of their own. The general
kernel reads, for every output element, the source offset from per-axis maps: affine
(``c * stride``) or a table (``tab[c]``, ``-1`` = the fill value), with the row of the outer
axes decoded once per work-item and a contiguous chunk of the last axis copied in a loop.
"""
from __future__ import annotations

import hashlib
import math
from string import Template

import numpy as np

from ..layout import strides_of  # noqa: F401 - the movement lowerings read it here
from . import _reduce_c as rc

BITS_TYPE = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}
BITS_NP = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def named(template: str, base: str) -> tuple[str, str]:
    """``(name, source)``: ``KNAME`` in ``template`` becomes ``base`` + a hash of it."""
    digest = hashlib.sha1(template.encode()).hexdigest()[:10]
    name = f"{base}_{digest}"
    return name, template.replace("KNAME", name)


def bits_type(size: int) -> str:
    return BITS_TYPE[size]


def split(rows: int, inner: int, device) -> tuple[int, int]:
    """``(chunk, chunks_per_row)`` of the last axis: one element per work-item on GPUs
    (neighbours write neighbours), long contiguous runs on CPUs (a loop per work-item)."""
    if inner <= 1:
        return 1, 1
    if rc.gpu_style(device):
        return 1, inner
    want = 4 * max(device.compute_units, 1)
    per_row = max(1, -(-want // max(rows, 1)))
    chunk = max(-(-inner // per_row), min(inner, 64))
    return chunk, -(-inner // chunk)


# ── index maps ─────────────────────────────────────────────────────────────

class AxisMap:
    """Output axis of size ``dim``: source offset ``c * stride`` or ``table[c]`` (-1: fill)."""

    __slots__ = ("dim", "stride", "table")

    def __init__(self, dim: int, stride: int = 0, table=None):
        self.dim, self.stride = int(dim), int(stride)
        self.table = None if table is None else np.asarray(table, np.int64)


def simplify(maps: list) -> list:
    """Drop size-1 affine axes (into ``base``) and merge neighbours that walk one stride."""
    kept = []
    for m in maps:
        if m.table is None and m.dim == 1:
            continue
        if kept and m.table is None and kept[-1].table is None and \
                kept[-1].stride == m.stride * m.dim:
            kept[-1] = AxisMap(kept[-1].dim * m.dim, m.stride)
            continue
        kept.append(m)
    return kept or [AxisMap(1, 0)]


def pack(maps: list) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis ``[dim, stride, table offset or -1]`` and the concatenated tables."""
    params, tables, at = [], [], 0
    for m in maps:
        if m.table is None:
            params += [m.dim, m.stride, -1]
        else:
            params += [m.dim, 0, at]
            tables.append(m.table)
            at += m.table.size
    tab = np.concatenate(tables) if tables else np.zeros(1, np.int64)
    return np.array(params, np.int64), tab


def rows_inner(maps: list) -> tuple[int, int]:
    return math.prod(m.dim for m in maps[:-1]), maps[-1].dim


# ── kernel sources ─────────────────────────────────────────────────────────

_MAP = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const long* ax,
                    __global const long* tab, __global const $T* fillv, int rank, long base,
                    long rows, long inner, long chunk, long nchunks)
{
    long gid = get_global_id(0);
    if (gid >= rows * nchunks) return;
    long row = gid / nchunks;
    long j0 = (gid - row * nchunks) * chunk;
    long j1 = min(j0 + chunk, inner);
    long src = base, r = row;
    int hole = 0;
    for (int d = rank - 2; d >= 0; --d) {      /* the outer axes, innermost first */
        long dim = ax[3 * d];
        long c = r % dim;
        r /= dim;
        long t = ax[3 * d + 2];
        if (t < 0) {
            src += c * ax[3 * d + 1];
        } else {
            long v = tab[t + c];
            hole |= v < 0;
            src += v;
        }
    }
    __global $T* o = out + row * inner;
    long st = ax[3 * (rank - 1) + 1], tl = ax[3 * (rank - 1) + 2];
    if (hole) {
        $T f = fillv[0];
        for (long j = j0; j < j1; ++j) o[j] = f;
    } else if (tl < 0) {
        __global const $T* s = x + src;
        for (long j = j0; j < j1; ++j) o[j] = s[j * st];
    } else {
        $T f = fillv[0];
        for (long j = j0; j < j1; ++j) {
            long v = tab[tl + j];
            o[j] = v < 0 ? f : x[src + v];
        }
    }
}
"""

_TRILU = """
__kernel void KNAME(__global $T* out, __global const $T* x, long nrows, long rows, long cols,
                    int upper, long diag, long chunk, long nchunks)
{
    long gid = get_global_id(0);
    if (gid >= nrows * nchunks) return;
    long row = gid / nchunks;
    long j0 = (gid - row * nchunks) * chunk;
    long j1 = min(j0 + chunk, cols);
    long i = row % rows;
    long base = row * cols;
    for (long j = j0; j < j1; ++j) {
        int keep = upper ? (j - i >= diag) : (j - i <= diag);
        out[base + j] = keep ? x[base + j] : ($T)(0);
    }
}
"""


def map_kernel(size: int) -> tuple[str, str]:
    """The general index-map copy for elements of ``size`` bytes."""
    return named(Template(_MAP).substitute(T=bits_type(size)), f"rlx_move{size}")


def trilu_kernel(size: int) -> tuple[str, str]:
    return named(Template(_TRILU).substitute(T=bits_type(size)), f"rlx_trilu{size}")
