"""Reductions, arg-reductions, softmax family, cumulative sums and TopK."""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ir.shape import Shape
from ..context import Unmappable, norm_axis
from . import converts

_SIMPLE = {"ReduceSum": "Sum", "ReduceMean": "Mean", "ReduceMax": "Max", "ReduceMin": "Min",
           "ReduceProd": "Prod"}
_COMPOSED = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


def _reduce_axes(ctx, ins, attrs, rank):
    """The reduced axes, or None for "no reduction" (noop_with_empty_axes)."""
    if attrs.has("axes"):
        axes = list(attrs.get("axes"))
    elif len(ins) > 1 and ins[1]:
        axes = [int(a) for a in np.asarray(ctx.need(ins[1], "axes")).reshape(-1)]
    else:
        axes = []
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    attrs.get("noop_with_empty_axes", 0)
    return sorted({norm_axis(a, rank, "axes") for a in axes})


@converts(*_SIMPLE, *_COMPOSED)
def reduce(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    keep = bool(attrs.get("keepdims", 1))
    axes = _reduce_axes(ctx, ins, attrs, len(ctx.dims(x)))
    t = node.op_type
    if t == "ReduceL1":
        x = ctx.act("Abs", x)
    elif t in ("ReduceL2", "ReduceSumSquare"):
        x = ctx.bin("Mul", x, x)
    elif t == "ReduceLogSumExp":
        x = ctx.act("Exp", x)
    if axes is None:
        return [ctx.op("StopGradient", (x,))]
    op = _SIMPLE.get(t, "Sum")
    boolean = ctx.dt(x).is_bool and op in ("Max", "Min")
    if boolean:     # any / all: RLX reduces numbers, so through u8 and back
        x = ctx.cast(x, DType.U8)
    y = ctx.op("Reduce", (x,), op=op, axes=tuple(axes), keep_dim=keep)
    if boolean:
        y = ctx.cast(y, DType.BOOL)
    if t == "ReduceL2":
        y = ctx.act("Sqrt", y)
    elif t in ("ReduceLogSum", "ReduceLogSumExp"):
        y = ctx.act("Log", y)
    return [y]


def _arg_input(ctx, x):
    """ArgMax/ArgMin take floats and i32; wider integers go through f64 (exact to 2**53)."""
    dt = ctx.dt(x)
    if dt.is_float or dt is DType.I32:
        return x
    return ctx.cast(x, DType.F64)


@converts("ArgMax", "ArgMin")
def arg_reduce(ctx, node, ins, attrs):
    x = _arg_input(ctx, ctx.id(ins[0]))
    dims = ctx.dims(x)
    ax = norm_axis(attrs.get("axis", 0), len(dims))
    keep = bool(attrs.get("keepdims", 1))
    last = attrs.get("select_last_index", 0)
    if last:
        x = ctx.op("Reverse", (x,), axes=(ax,))
    idx = ctx.cast(ctx.op(node.op_type, (x,), axis=ax, keep_dim=keep), DType.I64)
    if last:
        idx = ctx.bin("Sub", ctx.scalar(dims[ax] - 1, DType.I64), idx)
    return [idx]


@converts("Softmax")
def softmax(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    return [ctx.op("Softmax", (x,), axis=norm_axis(attrs.get("axis", -1), len(ctx.dims(x))))]


@converts("LogSoftmax")
def log_softmax(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    return [log_softmax_of(ctx, x, norm_axis(attrs.get("axis", -1), len(ctx.dims(x))))]


def log_softmax_of(ctx, x, ax):
    """x - max - log(Σ exp(x - max)) along ``ax``."""
    # x - max - log(Σ exp(x - max)): no underflow to log(0) for very negative logits
    m = ctx.op("Reduce", (x,), op="Max", axes=(ax,), keep_dim=True)
    s = ctx.bin("Sub", x, m)
    lse = ctx.act("Log", ctx.op("Reduce", (ctx.act("Exp", s),), op="Sum", axes=(ax,),
                                keep_dim=True))
    return ctx.bin("Sub", s, lse)


@converts("Hardmax")
def hardmax(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    ax = norm_axis(attrs.get("axis", -1), len(dims))
    src = _arg_input(ctx, x)
    idx = ctx.op("ArgMax", (src,), axis=ax, keep_dim=True)
    shape = [1] * len(dims)
    shape[ax] = dims[ax]
    pos = ctx.const(np.arange(dims[ax]).reshape(shape).astype(ctx.dt(src).np), ctx.dt(src))
    return [ctx.cast(ctx.cmp("Eq", idx, pos), ctx.dt(x))]


@converts("CumSum", "CumProd")
def cumsum(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    ax = norm_axis(int(ctx.need(ins[1], f"{node.op_type}'s axis")), len(ctx.dims(x)))
    rev = attrs.get("reverse", 0)
    if rev:
        x = ctx.op("Reverse", (x,), axes=(ax,))
    kind = "Cumsum" if node.op_type == "CumSum" else "CumProd"
    y = ctx.op(kind, (x,), axis=ax, exclusive=bool(attrs.get("exclusive", 0)))
    return [ctx.op("Reverse", (y,), axes=(ax,)) if rev else y]


@converts("TopK")
def topk(ctx, node, ins, attrs):
    x0 = ctx.id(ins[0])
    dims = ctx.dims(x0)
    k = int(np.asarray(ctx.need(ins[1], "TopK's k")).reshape(-1)[0])
    ax = norm_axis(attrs.get("axis", -1), len(dims))
    largest = attrs.get("largest", 1)
    if not attrs.get("sorted", 1):
        raise Unmappable("sorted=0 leaves the order unspecified; RLX's TopK sorts", "sorted")
    last = len(dims) - 1
    perm = list(range(len(dims)))
    perm[ax], perm[last] = last, ax
    x = x0 if ax == last else ctx.op("Transpose", (x0,), perm=tuple(perm))
    key = _arg_input(ctx, x)
    if not largest:
        key = ctx.act("Neg", key)
    tdims = list(ctx.dims(x))
    tdims[-1] = k
    idx = ctx.g.op("TopK", (key,), shape=Shape(tdims, DType.I64), k=k)
    vals = ctx.op("GatherElements", (x, idx), axis=last)
    if ax != last:
        idx = ctx.op("Transpose", (idx,), perm=tuple(perm))
        vals = ctx.op("Transpose", (vals,), perm=tuple(perm))
    return [vals, idx]


@converts("OneHot")
def one_hot(ctx, node, ins, attrs):
    idx = ctx.id(ins[0])
    depth = int(np.asarray(ctx.need(ins[1], "OneHot's depth")).reshape(-1)[0])
    vals = ctx.id(ins[2])
    r = len(ctx.dims(idx)) + 1
    ax = norm_axis(attrs.get("axis", -1), r)
    if not ctx.dt(idx).is_int:
        idx = ctx.cast(idx, DType.I64)
    neg = ctx.cmp("Lt", idx, ctx.like(0, idx))
    idx = ctx.where(neg, ctx.bin("Add", idx, ctx.like(depth, idx)), idx)
    dims = list(ctx.dims(idx))
    idx = ctx.reshape(idx, dims[:ax] + [1] + dims[ax:])
    shape = [1] * r
    shape[ax] = depth
    pos = ctx.const(np.arange(depth).reshape(shape).astype(ctx.dt(idx).np), ctx.dt(idx))
    off = ctx.op("Narrow", (vals,), axis=0, start=0, len=1)
    on = ctx.op("Narrow", (vals,), axis=0, start=1, len=1)
    return [ctx.where(ctx.cmp("Eq", idx, pos), on, off)]
