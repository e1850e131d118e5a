"""Tiled copies for maps that transpose: the output's last axis is strided in the input while
the axis before it is contiguous there (a 2-D transpose of each outer slice).

The general kernel would read one element per cache line. Here each tile of
``TILE x TILE`` elements is read along the input-contiguous axis and written along the
output-contiguous one: on GPUs through local memory (a work-group per tile, both sides
coalesced), on CPUs by one work-item looping over its tile (the tile stays in cache).
"""
from __future__ import annotations

from string import Template

from . import _reduce_c as rc
from ._move_src import bits_type, named

TILE_CPU = 32

_OUTER = """
    long src = base, r_ = o;
    for (int d = rank - 3; d >= 0; --d) {      /* the outer axes, innermost first */
        long dim = ax[3 * d];
        long c_ = r_ % dim;
        r_ /= dim;
        long t = ax[3 * d + 2];
        src += t < 0 ? c_ * ax[3 * d + 1] : tab[t + c_];
    }
"""

_CPU = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const long* ax,
                    __global const long* tab, int rank, long base, long outer, long R,
                    long C, long sc, long tiles_r, long tiles_c)
{
    long gid = get_global_id(0);
    long per = tiles_r * tiles_c;
    if (gid >= outer * per) return;
    long o = gid / per;
    long t_ = gid - o * per;
    long r0 = t_ / tiles_c * $TS, c0 = (t_ % tiles_c) * $TS;
    long r1 = min(r0 + $TS, R), c1 = min(c0 + $TS, C);
$OUTER
    __global $T* d = out + o * R * C;
    for (long r = r0; r < r1; ++r)
        for (long c = c0; c < c1; ++c)
            d[r * C + c] = x[src + r + c * sc];
}
"""

_GPU = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const long* ax,
                    __global const long* tab, int rank, long base, long outer, long R,
                    long C, long sc, long tiles_r, long tiles_c)
{
    __local $T tile[$TS][$TS + 1];
    long o = get_global_id(2);
    int lr = get_local_id(0), lc = get_local_id(1);
$OUTER
    long r = get_group_id(0) * $TS + lr, c = get_group_id(1) * $TS + lc;
    if (r < R && c < C) tile[lc][lr] = x[src + r + c * sc];     /* r walks the input */
    barrier(CLK_LOCAL_MEM_FENCE);
    long r2 = get_group_id(0) * $TS + lc, c2 = get_group_id(1) * $TS + lr;
    if (r2 < R && c2 < C) out[(o * R + r2) * C + c2] = tile[lr][lc];   /* c2 walks out */
}
"""


def gpu_tile(device) -> int:
    """The square work-group side for the GPU kernel (0: the device cannot hold one)."""
    for ts in (16, 8):
        if device.max_work_group >= ts * ts and device.local_mem >= ts * (ts + 1) * 16:
            return ts
    return 0


def fits(maps: list, fill) -> bool:
    """Whether ``maps`` transpose: last axis strided, the one before contiguous."""
    if fill is not None or len(maps) < 2:
        return False
    a, b = maps[-2], maps[-1]
    return (a.table is None and b.table is None and a.stride == 1 and b.stride != 1
            and a.dim >= 4 and b.dim >= 4)


def tile_kernel(size: int, device) -> tuple[str, str, int, bool]:
    """``(name, source, tile side, on the GPU path)`` for elements of ``size`` bytes."""
    ts = gpu_tile(device) if rc.gpu_style(device) else 0
    gpu = ts > 0
    ts = ts or TILE_CPU
    body = Template(_GPU if gpu else _CPU).substitute(T=bits_type(size), TS=ts, OUTER=_OUTER)
    name, source = named(body, f"rlx_movet{size}_{'g' if gpu else 'c'}")
    return name, source, ts, gpu
