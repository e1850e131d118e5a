"""Compress, ReverseSequence and LRN: gathers with import-time indices, and a channel
window sum."""
from __future__ import annotations

import math

import numpy as np

from ..context import Unmappable, norm_axis
from . import converts


@converts("Compress")
def compress(ctx, node, ins, attrs):
    """The kept positions fix the output's shape: the condition is needed at import time."""
    cond = np.asarray(ctx.need(ins[1], "Compress's condition")).astype(bool).reshape(-1)
    x = ctx.id(ins[0])
    axis = attrs.get("axis")
    if axis is None:
        x = ctx.reshape(x, (int(np.prod(ctx.dims(x))),))
        ax = 0
    else:
        ax = norm_axis(axis, len(ctx.dims(x)))
    n = ctx.dims(x)[ax]
    keep = np.nonzero(cond[:n])[0].astype(np.int64)    # ONNX: a short condition keeps less
    if keep.size == 0:
        raise Unmappable("a condition that keeps nothing (an empty output)")
    return [ctx.op("Gather", (x, ctx.const(keep)), axis=ax)]


@converts("ReverseSequence")
def reverse_sequence(ctx, node, ins, attrs):
    """Each batch row's first len[b] steps reversed: one GatherElements along time with
    indices built at import from the (import-time) lengths."""
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    t_ax = norm_axis(attrs.get("time_axis", 0), len(dims), "time_axis")
    b_ax = norm_axis(attrs.get("batch_axis", 1), len(dims), "batch_axis")
    lens = np.asarray(ctx.need(ins[1], "ReverseSequence's sequence_lens")).reshape(-1)
    steps, batch = dims[t_ax], dims[b_ax]
    if lens.size != batch or np.any(lens < 0) or np.any(lens > steps):
        raise Unmappable(f"sequence_lens {lens.tolist()} for {batch} rows of {steps} steps")
    t = np.arange(steps)[:, None]
    idx = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)     # [time, batch]
    shape = [1] * len(dims)
    shape[t_ax], shape[b_ax] = steps, batch
    if t_ax > b_ax:
        idx = idx.T
    full = np.broadcast_to(idx.reshape(shape), dims).astype(np.int64)
    return [ctx.op("GatherElements", (x, ctx.const(np.ascontiguousarray(full))), axis=t_ax)]


@converts("LRN")
def lrn(ctx, node, ins, attrs):
    """x / (bias + alpha/size · Σ x² over the channel window)^beta (ONNX's window:
    floor((size-1)/2) channels before, ceil((size-1)/2) after)."""
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    size = int(attrs.get("size"))
    alpha, beta = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75)
    bias = attrs.get("bias", 1.0)
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    sq = ctx.bin("Mul", x, x)
    pads = tuple((0, 0) if a != 1 else (before, after) for a in range(len(dims)))
    padded = ctx.op("Pad", (sq,), pads=pads, mode=("Constant", 0.0))
    total = None
    for k in range(size):
        s = ctx.op("Slice", (padded,), axis=1, start=k, len=dims[1], step=1)
        total = s if total is None else ctx.bin("Add", total, s)
    base = ctx.bin("Add", ctx.like(bias, x), ctx.bin("Mul", ctx.like(alpha / size, x), total))
    return [ctx.bin("Div", x, ctx.bin("Pow", base, ctx.like(beta, x)))]


@converts("TensorScatter")
def tensor_scatter(ctx, node, ins, attrs):
    """The update written into the cache at each batch row's write index (mod the cache
    length when circular): one ScatterElements along the sequence axis."""
    from ...ir.dtype import DType

    past, upd = ctx.id(ins[0]), ctx.id(ins[1])
    dims, udims = ctx.dims(past), ctx.dims(upd)
    ax = norm_axis(attrs.get("axis", -2), len(dims))
    mode = attrs.only("mode", ("linear", "circular"), "linear")
    if ax == 0:
        raise Unmappable("axis 0 is the batch axis", "axis")
    seq, size = udims[ax], dims[ax]
    steps = [1] * len(dims)
    steps[ax] = seq
    pos = ctx.const(np.arange(seq, dtype=np.int64).reshape(steps))
    if len(ins) > 2 and ins[2]:
        rows = [dims[0]] + [1] * (len(dims) - 1)
        pos = ctx.bin("Add", ctx.reshape(ctx.cast(ctx.id(ins[2]), DType.I64), rows), pos)
    if mode == "circular":
        pos = ctx.bin("Mod", pos, ctx.scalar(size, DType.I64))   # indices are >= 0
    idx = ctx.op("Expand", (pos,), target_shape=tuple(udims))
    return [ctx.op("ScatterElements", (past, idx, upd), axis=ax, reduction="None")]
