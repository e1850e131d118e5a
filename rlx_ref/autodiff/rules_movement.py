"""VJP rules of the movement and indexing kinds.

Movement cotangents move back the way the data came (Transpose by the inverse
permutation, Narrow into zeros, Concat split by Narrow); gathers scatter-add their
cotangent, so duplicate indices accumulate. Slice, Pad, Tile and Trilu are decomposed
into these kinds before differentiation; index operands never get a gradient.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import normalize_axis
from ._build import (constant, expand, inverse_perm, reduce_sum, reshape, scalar, static_dims,
                     transpose, unbroadcast, zeros)
from .vjp import vjp_rule


@vjp_rule("Reshape")
def vjp_reshape(ctx, dy):
    return [reshape(ctx.g, dy, static_dims(ctx.g, ctx.x[0], ctx.where))]


@vjp_rule("Transpose")
def vjp_transpose(ctx, dy):
    return [transpose(ctx.g, dy, inverse_perm(ctx.attrs.perm))]


@vjp_rule("Expand")
def vjp_expand(ctx, dy):
    return [unbroadcast(ctx.g, dy, ctx.in_shapes[0])]


@vjp_rule("Reverse")
def vjp_reverse(ctx, dy):
    return [ctx.g.op("Reverse", (dy,), axes=ctx.attrs.axes)]


@vjp_rule("Concat")
def vjp_concat(ctx, dy):
    axis = normalize_axis(ctx.attrs.axis, ctx.out_shape.rank)
    out, start = [], 0
    for s in ctx.in_shapes:
        n = s.dims[axis]
        out.append(ctx.g.op("Narrow", (dy,), axis=axis, start=start, len=n))
        start += n
    return out


@vjp_rule("Narrow")
def vjp_narrow(ctx, dy):
    """The cotangent in its window, zeros around it (a Concat along the axis)."""
    g, a = ctx.g, ctx.attrs
    dims = static_dims(g, ctx.x[0], ctx.where)
    axis = normalize_axis(a.axis, len(dims))
    parts = []
    for size in (a.start, None, dims[axis] - a.start - a.len):
        if size is None:
            parts.append(dy)
        elif size > 0:
            parts.append(zeros(g, ctx.in_shapes[0].with_dim(axis, size)))
    return [parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=axis)]


@vjp_rule("ResizeNearest2x")
def vjp_resize_nearest2x(ctx, dy):
    """Each input pixel's cotangent is the sum over the 2x2 block it was copied to."""
    n, c, h, w = static_dims(ctx.g, ctx.x[0], ctx.where)
    blocks = reshape(ctx.g, dy, (n, c, h, 2, w, 2))
    return [reshape(ctx.g, reduce_sum(ctx.g, blocks, (3, 5), keep_dim=True), (n, c, h, w))]


@vjp_rule("Gather")
def vjp_gather(ctx, dy):
    """``GatherBackward{axis}(dy, indices)`` with the table's shape."""
    table, idx = ctx.x
    return [ctx.g.op("GatherBackward", (dy, idx), axis=ctx.attrs.axis, shape=ctx.in_shapes[0]),
            None]


@vjp_rule("GatherElements")
def vjp_gather_elements(ctx, dy):
    g, idx = ctx.g, ctx.x[1]
    base = zeros(g, ctx.in_shapes[0])
    return [g.op("ScatterElements", (base, idx, dy), axis=ctx.attrs.axis, reduction="Add"),
            None]


@vjp_rule("GatherNd")
def vjp_gather_nd(ctx, dy):
    g, idx = ctx.g, ctx.x[1]
    if ctx.attrs.batch_dims:
        raise ctx.fail("GatherNd with batch_dims > 0 has no VJP rule yet")
    base = zeros(g, ctx.in_shapes[0])
    return [g.op("ScatterNd", (base, idx, dy), reduction="Add"), None]


@vjp_rule("ScatterAdd")
def vjp_scatter_add(ctx, dy):
    """out[idx[i]] += updates[i]: each update's cotangent is the row it landed in."""
    return [ctx.g.op("Gather", (dy, ctx.x[1]), axis=0), None]


def _scatter_grads(ctx, dy, gather_kind: str, **gather_attrs):
    """Add scatters: the data keeps the whole cotangent and each update reads its target's.
    Overwrite scatters: only the update that won its target (the last, as the forward
    writes) reads the target's cotangent, and the data keeps it where nothing landed. The
    winners are found by scattering each update's position id the same way."""
    g, (data, idx, upd) = ctx.g, ctx.x
    red = ctx.attrs.reduction
    d_upd = g.op(gather_kind, (dy, idx), **gather_attrs)
    if red == "Add":
        return [dy, None, d_upd]
    if red != "None":
        raise ctx.fail(f"{ctx.node.kind} with reduction {red} has no VJP rule")
    upd_dims = static_dims(g, upd, ctx.where)
    ids = constant(g, np.arange(int(np.prod(upd_dims))).reshape(upd_dims), DType.I64, upd_dims)
    free = expand(g, scalar(g, -1, DType.I64), static_dims(g, data, ctx.where))
    winner = g.op(ctx.node.kind, (free, idx, ids), **dict(ctx.attrs.__dict__))
    kept = g.op("Compare", (winner, scalar(g, -1, DType.I64)), op="Eq")
    won = g.op("Compare", (g.op(gather_kind, (winner, idx), **gather_attrs), ids), op="Eq")
    zero = scalar(g, 0, ctx.out_shape.dtype)
    return [g.op("Where", (kept, dy, zero)), None, g.op("Where", (won, d_upd, zero))]


@vjp_rule("ScatterElements")
def vjp_scatter_elements(ctx, dy):
    return _scatter_grads(ctx, dy, "GatherElements", axis=ctx.attrs.axis)


@vjp_rule("ScatterNd")
def vjp_scatter_nd(ctx, dy):
    return _scatter_grads(ctx, dy, "GatherNd", batch_dims=0)
