"""Batching rules of the indexing kinds: Gather, GatherElements, GatherNd, ScatterAdd,
ScatterElements, ScatterNd.

A batched table with shared indices (or the reverse) is the same op with shifted axes. When
both carry the batch, each example must index its own table, which these ops express with
a batched index: Gather becomes GatherNd with ``batch_dims = 1``; GatherNd and the
elementwise ones widen ``batch_dims``/the axis; ScatterNd gets the example number as a
leading index coordinate, and ScatterAdd offsets each example's indices by
``example · out_dim`` into one flat destination. (RLX keeps Gather and ScatterAdd and lifts
both operands, which indexes across examples.)
"""
from __future__ import annotations

import numpy as np

from ._build import binary, constant, reshape, transpose
from ._batching import batch_rule, merge_leading, shift, split_leading


@batch_rule("Gather")
def batch_gather(ctx):
    axis = ctx.attrs.axis
    (dt, di), idx_rank = ctx.bdims, ctx.in_shapes[1].rank
    if di is None:
        out_d = dt if dt <= axis else dt - 1 + idx_rank
        return ctx.emit("Gather", ctx.x, out_d, ctx.replace(axis=shift(axis, dt)))
    if dt is None:
        return ctx.emit("Gather", ctx.x, axis + di)
    return _per_example_gather(ctx, axis, idx_rank)


def _per_example_gather(ctx, axis: int, idx_rank: int):
    """Table ``[B, T_axis, rest...]`` and indices ``[B, idx..., 1]`` through GatherNd with
    one batch dim give ``[B, idx..., rest...]``; a transpose puts the leading rest first."""
    g = ctx.g
    table = ctx.moved(0, 0)
    perm = [0, axis + 1] + [i for i in range(1, ctx.in_shapes[0].rank + 1) if i != axis + 1]
    table = transpose(g, table, perm)
    idx = ctx.moved(1, 0)
    idx = reshape(g, idx, ctx.static(idx) + (1,))
    got = g.op("GatherNd", (table, idx), batch_dims=1)
    rest = ctx.in_shapes[0].rank - 1
    order = ([0] + [1 + idx_rank + j for j in range(axis)] + list(range(1, 1 + idx_rank))
             + [1 + idx_rank + j for j in range(axis, rest)])
    return transpose(g, got, order), 0


@batch_rule("GatherElements")
def batch_gather_elements(ctx):
    axis = ctx.attrs.axis % ctx.in_shapes[0].rank + 1
    return ctx.emit("GatherElements", (ctx.moved(0, 0), ctx.moved(1, 0)), 0,
                    ctx.replace(axis=axis))


@batch_rule("GatherNd")
def batch_gather_nd(ctx):
    """Shared data with batched indices and no batch dims: the batch is one more leading
    index axis. Otherwise both get the batch at 0 and it becomes a batch dim."""
    b = ctx.attrs.batch_dims
    if ctx.bdims[0] is None and b == 0:
        d = ctx.bdims[1]
        if d == ctx.in_shapes[1].rank:          # the batch is the index-tuple axis
            return ctx.emit("GatherNd", (ctx.x[0], ctx.moved(1, 0)), 0)
        return ctx.emit("GatherNd", ctx.x, d)
    return ctx.emit("GatherNd", (ctx.moved(0, 0), ctx.moved(1, 0)), 0,
                    ctx.replace(batch_dims=b + 1))


@batch_rule("ScatterAdd")
def batch_scatter_add(ctx):
    g = ctx.g
    du, di = ctx.bdims
    if di is None:      # shared indices: the batch is one more trailing axis of each row
        upd = ctx.moved(0, 1) if du == 0 else ctx.x[0]
        return ctx.emit("ScatterAdd", (upd, ctx.x[1]), max(du, 1))
    out_dim = ctx.out_shape.dims[0]
    upd = merge_leading(g, ctx.moved(0, 0), ctx.where)
    idx = ctx.moved(1, 0)
    dt = g.shape(idx).dtype
    offsets = constant(g, (np.arange(ctx.size) * out_dim).reshape(ctx.size, 1), dt,
                       (ctx.size, 1))
    idx = reshape(g, binary(g, "Add", idx, offsets), (-1,))
    flat = ctx.out_shape.with_dims((ctx.size * out_dim,) + tuple(ctx.out_shape.dims[1:]))
    out = g.op("ScatterAdd", (upd, idx), shape=flat)
    return split_leading(g, out, ctx.size, ctx.where), 0


@batch_rule("ScatterElements")
def batch_scatter_elements(ctx):
    axis = ctx.attrs.axis % ctx.in_shapes[0].rank + 1
    ins = [ctx.moved(i, 0) for i in range(3)]
    return ctx.emit("ScatterElements", ins, 0, ctx.replace(axis=axis))


@batch_rule("ScatterNd")
def batch_scatter_nd(ctx):
    """Each index tuple gains the example number as its first coordinate."""
    g = ctx.g
    data, upd, idx = ctx.moved(0, 0), ctx.moved(2, 0), ctx.moved(1, 0)
    dims = ctx.static(idx)
    dt = g.shape(idx).dtype
    lead = (ctx.size,) + (1,) * (len(dims) - 1)
    example = constant(g, np.arange(ctx.size).reshape(lead), dt, lead)
    example = g.op("Expand", (example,), target_shape=dims[:-1] + (1,))
    idx = g.op("Concat", (example, idx), axis=len(dims) - 1)
    return ctx.emit("ScatterNd", (data, idx, upd), 0)
