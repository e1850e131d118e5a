"""MaxPool's Indices output: every window's taps gathered into one axis, the first
maximum's tap (ONNX's strict > scan) mapped to its flat input position by a static table."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable
from ._pool import pool_geometry, window_indices


def max_pool_with_indices(ctx, attrs, x, kernel, strides, dil, pads, ceil):
    """(values, indices) of a MaxPool; indices count over the whole input tensor, row-major
    (storage_order 0) or column-major over the spatial axes (storage_order 1)."""
    from .nn import _explicit_pad

    order = attrs.only("storage_order", (0, 1), 0)
    dims = ctx.dims(x)
    n, spatial = len(dims) - 2, dims[2:]
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    full, outs = pool_geometry(spatial, span, strides, pads, ceil)
    xp = _explicit_pad(ctx, x, full, -np.inf)
    for j, (o, k, s, d) in enumerate(zip(outs, kernel, strides, dil)):
        xp = ctx.op("Gather", (xp, ctx.const(window_indices(o, k, s, d))), axis=2 + 2 * j)
    # [N, C, o1, k1, o2, k2, ...] → [N, C, o1, o2, ..., k1·k2·...]
    perm = (0, 1) + tuple(2 + 2 * j for j in range(n)) + tuple(3 + 2 * j for j in range(n))
    taps = math.prod(kernel)
    win = ctx.reshape(ctx.op("Transpose", (xp,), perm=perm), tuple(dims[:2]) + tuple(outs) +
                      (taps,))
    values = ctx.op("Reduce", (win,), op="Max", axes=(n + 2,), keep_dim=False)
    arg = ctx.cast(ctx.op("ArgMax", (win,), axis=n + 2, keep_dim=True), DType.I64)
    weights = [math.prod(spatial[j + 1:]) if order == 0 else math.prod(spatial[:j])
               for j in range(n)]
    if order == 1 and n != 2:
        raise Unmappable("storage_order=1 outside 2-D pools", "storage_order")
    table = np.zeros(tuple(outs) + (taps,), np.int64)
    for pos in itertools.product(*[range(o) for o in outs]):
        for t, tap in enumerate(itertools.product(*[range(k) for k in kernel])):
            at = [pos[j] * strides[j] + tap[j] * dil[j] - full[j][0] for j in range(n)]
            inside = all(0 <= at[j] < spatial[j] for j in range(n))
            table[pos + (t,)] = sum(a * w for a, w in zip(at, weights)) if inside else -1
    full_table = ctx.op("Expand", (ctx.const(table.reshape((1, 1) + table.shape)),),
                        target_shape=tuple(dims[:2]) + tuple(outs) + (taps,))
    idx = ctx.reshape(ctx.op("GatherElements", (full_table, arg), axis=n + 2),
                      tuple(dims[:2]) + tuple(outs))
    plane = math.prod(spatial)
    base = (np.arange(dims[0] * dims[1], dtype=np.int64) * plane).reshape(
        (dims[0], dims[1]) + (1,) * n)
    return values, ctx.bin("Add", idx, ctx.const(base))
