"""Batching rules of the reductions and scans: Reduce, Softmax, Cumsum, CumProd, CumMax,
ArgMax, ArgMin, TopK.

Each works along named axes, so the batch axis stays where it is and the axes shift past
it (RLX shifts them by one with the batch at 0); a reduction that drops axes before the
batch axis moves it left by as many. TopK reads the last axis, so a batch there moves to 0.
"""
from __future__ import annotations

from ._batching import batch_rule, shift


@batch_rule("Reduce")
def batch_reduce(ctx):
    (x,), (d,), a = ctx.x, ctx.bdims, ctx.attrs
    axes = tuple(shift(ax, d) for ax in a.axes)
    out_d = d if a.keep_dim else d - sum(1 for ax in set(a.axes) if ax < d)
    return ctx.emit("Reduce", (x,), out_d, ctx.replace(axes=axes))


@batch_rule("Softmax", "Cumsum", "CumProd", "CumMax")
def batch_signed_axis(ctx):
    """The i32 axis (negative counts from the end) made absolute, then shifted."""
    (x,), (d,) = ctx.x, ctx.bdims
    axis = ctx.attrs.axis % ctx.in_shapes[0].rank
    return ctx.emit(ctx.node.kind, (x,), d, ctx.replace(axis=shift(axis, d)))


@batch_rule("ArgMax", "ArgMin")
def batch_arg(ctx):
    (x,), (d,), a = ctx.x, ctx.bdims, ctx.attrs
    out_d = d if a.keep_dim or a.axis >= d else d - 1
    return ctx.emit(ctx.node.kind, (x,), out_d, ctx.replace(axis=shift(a.axis, d)))


@batch_rule("TopK")
def batch_topk(ctx):
    d = ctx.bdims[0]
    if d == ctx.in_shapes[0].rank:      # the batch is the searched (last) axis
        return ctx.emit("TopK", (ctx.moved(0, 0),), 0)
    return ctx.emit("TopK", ctx.x, d)
