"""Lowering of KvAppend and Histogram (ops/kv_cache, ops/histogram).

KvAppend copies bytes: the cache's `[outer, pos, inner]` prefix and the row are viewed as
uint8 blocks, so one kernel serves every dtype. Histogram places each value by binary
search over the oracle's f32 edges (``ops.histogram.edges``) and counts
in int64; f16/bf16 inputs run through exact f32 shadows.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import ALL_DTYPES, DType
from ...ops.histogram import edges
from ._reduce_geom import shadow
from .kernels import compile_kernel
from .lowering import Step, lowers

SOURCE = '''
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_KJ)
def kv_append(out, cache, row, outer, pos, cap, inner):
    """out[o, :pos] = cache[o, :pos]; out[o, pos] = row[o] (byte blocks of ``inner``)."""
    for o in range(outer):
        src = o * cap * inner
        dst = o * (pos + 1) * inner
        for k in range(pos * inner):
            out[dst + k] = cache[src + k]
        for k in range(inner):
            out[dst + pos * inner + k] = row[o * inner + k]


@njit(**_KJ)
def histogram(out, x, e):
    """out[b] = #{v : e[b] <= v < e[b + 1]}; e ascends, so a value has at most one b."""
    bins = out.size
    cnt = np.zeros(bins, np.int64)
    lo, hi = e[0], e[bins]
    for i in range(x.size):
        v = np.float64(x[i])
        if v >= lo and v < hi:           # NaN fails both
            a, b = 0, bins
            while b - a > 1:             # largest a with e[a] <= v
                m = (a + b) // 2
                if e[m] <= v:
                    a = m
                else:
                    b = m
            cnt[a] += 1
    for b in range(bins):
        out[b] = cnt[b]
'''


def _kernel():
    return compile_kernel("kv_append", SOURCE)


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


@lowers("KvAppend", ALL_DTYPES)
def lower_kv_append(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("kv_append")
    axis, pos = node.attrs.axis, node.attrs.pos
    dims = [int(d) for d in ins[0].dims]
    outer = math.prod(dims[:axis])
    inner = math.prod(dims[axis + 1:]) * ins[0].dtype.np.itemsize

    def run(out, cache, row):
        cap = cache.shape[axis]
        if pos >= cap:          # dynamic capacity: the verifier could not check
            raise ValueError(f"KvAppend pos {pos} is past the cache's axis-{axis} "
                             f"capacity {cap}")
        if out.size:
            fn(out.reshape(-1).view(np.uint8), _bytes(cache), _bytes(row), outer, pos, cap,
               inner)
    return Step(run, [kernel])


@lowers("Histogram", (DType.F32,), reason="counts in int64, written as f32")
def lower_histogram(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("histogram")
    e = np.ascontiguousarray(edges(node.attrs))

    def run(out, x):
        fn(out.reshape(-1), shadow(np.ascontiguousarray(x)), e)
    return Step(run, [kernel])
