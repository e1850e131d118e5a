"""Batching rules of the movement kinds: Reshape, Transpose, Expand, Concat, Narrow,
Slice, Reverse, Pad, Tile, Trilu, ResizeNearest2x.

Axis-parametrized ops keep the batch axis where it is and shift their axes past it.
Reshape and Expand need the batch leading (they reinterpret or align dims from the
right), so it moves to 0 first; Transpose puts it at 0 as part of its own permutation.
"""
from __future__ import annotations

from ._build import reshape
from ._batching import batch_rule, merge_leading, shift, split_leading


@batch_rule("Reshape")
def batch_reshape(ctx):
    x = ctx.moved(0, 0)
    out = ctx.out_shape
    dims = out.dims if out.is_static else ctx.attrs.new_shape
    return ctx.emit("Reshape", (x,), 0, ctx.replace(new_shape=(ctx.size,) + tuple(dims)))


@batch_rule("Transpose")
def batch_transpose(ctx):
    d = ctx.bdims[0]
    perm = (d,) + tuple(shift(p, d) for p in ctx.attrs.perm)
    return ctx.emit("Transpose", ctx.x, 0, ctx.replace(perm=perm))


@batch_rule("Expand")
def batch_expand(ctx):
    """Batch leading, the operand padded with size-1 axes to the output's rank, and the
    target likewise: the two-way broadcast then matches the unbatched one dim for dim."""
    rank = ctx.out_shape.rank
    dims = ctx.in_shapes[0].dims
    x = ctx.moved(0, 0)
    if len(dims) < rank:
        x = reshape(ctx.g, x, (ctx.size,) + (1,) * (rank - len(dims)) + tuple(dims))
    target = tuple(ctx.attrs.target_shape)
    target = (ctx.size,) + (1,) * (rank - len(target)) + target
    return ctx.emit("Expand", (x,), 0, ctx.replace(target_shape=target))


@batch_rule("Concat")
def batch_concat(ctx):
    d = next(b for b in ctx.bdims if b is not None)
    ins = [ctx.moved(i, d) for i in range(len(ctx.x))]
    return ctx.emit("Concat", ins, d, ctx.replace(axis=shift(ctx.attrs.axis, d)))


@batch_rule("Narrow", "Slice")
def batch_axis(ctx):
    d = ctx.bdims[0]
    return ctx.emit(ctx.node.kind, ctx.x, d, ctx.replace(axis=shift(ctx.attrs.axis, d)))


@batch_rule("Reverse")
def batch_reverse(ctx):
    d = ctx.bdims[0]
    axes = tuple(shift(a, d) for a in ctx.attrs.axes)
    return ctx.emit("Reverse", ctx.x, d, ctx.replace(axes=axes))


@batch_rule("Pad")
def batch_pad(ctx):
    """The batch axis gets no padding."""
    d = ctx.bdims[0]
    pads = list(ctx.attrs.pads)
    pads.insert(d, (0, 0))
    return ctx.emit("Pad", ctx.x, d, ctx.replace(pads=tuple(pads)))


@batch_rule("Tile")
def batch_tile(ctx):
    """The batch axis is not repeated."""
    d = ctx.bdims[0]
    reps = list(ctx.attrs.reps)
    reps.insert(d, 1)
    return ctx.emit("Tile", ctx.x, d, ctx.replace(reps=tuple(reps)))


@batch_rule("Trilu")
def batch_trilu(ctx):
    """The matrix is the last two axes; a batch among them moves to 0 (a leading axis is
    another batch axis to Trilu)."""
    d = ctx.bdims[0]
    if d >= ctx.in_shapes[0].rank - 1:
        return ctx.emit("Trilu", (ctx.moved(0, 0),), 0)
    return ctx.emit("Trilu", ctx.x, d)


@batch_rule("ResizeNearest2x")
def batch_resize(ctx):
    """NCHW only: the batch folds into N and back out."""
    flat = merge_leading(ctx.g, ctx.moved(0, 0), ctx.where)
    y = ctx.g.op("ResizeNearest2x", (flat,))
    return split_leading(ctx.g, y, ctx.size, ctx.where), 0
