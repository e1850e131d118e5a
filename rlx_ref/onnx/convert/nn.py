"""Neural-network ONNX ops: MatMul, Gemm, Conv, pools and normalizations."""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType

from ..context import Unmappable, norm_axis
from . import converts
from ._pool import pool_geometry, sum_pool_counts, window_indices


@converts("MatMul")
def matmul(ctx, node, ins, attrs):
    a, b = ctx.id(ins[0]), ctx.id(ins[1])
    da, db = ctx.dims(a), ctx.dims(b)
    if len(da) == 1:
        a = ctx.reshape(a, (1, da[0]))
    if len(db) == 1:
        b = ctx.reshape(b, (db[0], 1))
    y = ctx.op("MatMul", (a, b))
    dims = list(ctx.dims(y))
    if len(db) == 1:
        dims.pop(-1)
    if len(da) == 1:
        dims.pop(-2 if len(db) > 1 else -1)
    return [ctx.reshape(y, dims)]


@converts("Gemm")
def gemm(ctx, node, ins, attrs):
    a, b = ctx.id(ins[0]), ctx.id(ins[1])
    if attrs.get("transA", 0):
        a = ctx.op("Transpose", (a,), perm=(1, 0))
    if attrs.get("transB", 0):
        b = ctx.op("Transpose", (b,), perm=(1, 0))
    y = ctx.op("MatMul", (a, b))
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = ctx.bin("Mul", y, ctx.like(alpha, y))
    if len(ins) > 2 and ins[2]:
        c = ctx.id(ins[2])
        if beta != 1.0:
            c = ctx.bin("Mul", c, ctx.like(beta, c))
        y = ctx.bin("Add", y, c)
    return [y]


def _spatial_pads(ctx, attrs, x, kernel, strides, dilations):
    """Per-axis (begin, end) padding from ``pads`` or ``auto_pad``."""
    dims = ctx.dims(x)[2:]
    n = len(dims)
    auto = attrs.only("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    pads = list(attrs.get("pads", [0] * (2 * n)))
    if auto == "VALID":
        return [(0, 0)] * n
    if auto.startswith("SAME"):
        out = []
        for d, k, s, dl in zip(dims, kernel, strides, dilations):
            total = max((-(-d // s) - 1) * s + (k - 1) * dl + 1 - d, 0)
            small = total // 2
            out.append((small, total - small) if auto == "SAME_UPPER" else
                       (total - small, small))
        return out
    return list(zip(pads[:n], pads[n:]))


def _explicit_pad(ctx, x, pads, value=0.0):
    if not any(b or e for b, e in pads):
        return x
    return ctx.op("Pad", (x,), pads=((0, 0), (0, 0)) + tuple(pads), mode=("Constant", value))


@converts("Conv")
def conv(ctx, node, ins, attrs):
    x, w = ctx.id(ins[0]), ctx.id(ins[1])
    n = len(ctx.dims(x)) - 2
    kernel = list(attrs.get("kernel_shape", ctx.dims(w)[2:]))
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    pads = _spatial_pads(ctx, attrs, x, kernel, strides, dil)
    groups = attrs.get("group", 1)
    sym = [b for b, e in pads] if all(b == e for b, e in pads) else None
    if sym is None:
        x, sym = _explicit_pad(ctx, x, pads), [0] * n
    if n == 1:
        y = ctx.op("Conv", (x, w), kernel_size=(1, kernel[0]), stride=(1, strides[0]),
                   padding=(0, sym[0]), dilation=(1, dil[0]), groups=groups)
    elif n == 2:
        y = ctx.op("Conv", (x, w), kernel_size=tuple(kernel), stride=tuple(strides),
                   padding=tuple(sym), dilation=tuple(dil), groups=groups)
    elif n == 3:
        y = ctx.op("Conv3d", (x, w), stride=tuple(strides), padding=tuple(sym),
                   dilation=tuple(dil), groups=groups)
    else:
        raise Unmappable(f"a {n}-D convolution (RLX has 1-, 2- and 3-D)")
    return [_bias(ctx, y, ins, n)]


def _bias(ctx, y, ins, n):
    if len(ins) > 2 and ins[2]:
        b = ctx.id(ins[2])
        y = ctx.bin("Add", y, ctx.reshape(b, (ctx.dims(b)[0],) + (1,) * n))
    return y


@converts("MaxPool", "AveragePool", "LpPool")
def pool(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    orig = ctx.dt(x)
    if node.op_type == "MaxPool" and orig.name in ("U8", "I8", "I16"):
        x = ctx.cast(x, DType.F32)      # RLX pools floats; a max of these is exact in f32
    lp = node.op_type == "LpPool"
    if lp:      # (Σ |x|^p)^(1/p): a Sum pool between two elementwise steps
        p = attrs.get("p", 2)
        x = ctx.bin("Pow", ctx.act("Abs", x), ctx.like(p, x))
    dims = ctx.dims(x)
    n = len(dims) - 2
    kernel = list(attrs.get("kernel_shape"))
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    pads = _spatial_pads(ctx, attrs, x, kernel, strides, dil)
    ceil = attrs.get("ceil_mode", 0)
    if len([o for o in node.output if o]) > 1:
        from .pool_indices import max_pool_with_indices

        y, idx = max_pool_with_indices(ctx, attrs, x, kernel, strides, dil, pads, ceil)
        return [ctx.cast(y, orig), idx]
    attrs.only("storage_order", (0,), 0)      # it orders only the Indices output
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    full, outs = pool_geometry(dims[2:], span, strides, pads, ceil)
    is_max = node.op_type == "MaxPool"
    xp = _explicit_pad(ctx, x, full, -np.inf if is_max else 0.0)
    kind = "Max" if is_max else "Sum"
    if any(d != 1 for d in dil):
        y = _gather_pool(ctx, xp, kind, outs, kernel, strides, dil)
    elif n in (1, 2, 3):
        if n == 1:      # RLX pools are 2-D or 3-D: a 1-D pool runs on [N, C, 1, L]
            xp = ctx.reshape(xp, ctx.dims(xp)[:2] + (1,) + ctx.dims(xp)[2:])
        y = ctx.op("Pool", (xp,), kind=kind, kernel_size=tuple([1] * (n == 1) + kernel),
                   stride=tuple([1] * (n == 1) + strides))
        y = ctx.reshape(y, tuple(dims[:2]) + tuple(outs))
    else:
        raise Unmappable(f"a {n}-D pool (RLX pools are 1-, 2- and 3-D)")
    if lp:
        y = ctx.bin("Pow", y, ctx.like(1.0 / p, y))
    elif not is_max:
        inc = attrs.get("count_include_pad", 0)
        counts = sum_pool_counts(dims[2:], kernel, strides, dil, full, pads, inc, outs)
        y = ctx.bin("Div", y, ctx.const(counts.astype(ctx.dt(y).np), ctx.dt(y)))
    return [ctx.cast(y, orig)]


def _gather_pool(ctx, xp, kind, outs, kernel, strides, dil):
    """A dilated pool (RLX's Pool has no dilation): gather every window's taps into their
    own axes, then reduce them."""
    taps = []
    for j, (o, k, s, d) in enumerate(zip(outs, kernel, strides, dil)):
        axis = 2 + 2 * j
        xp = ctx.op("Gather", (xp, ctx.const(window_indices(o, k, s, d))), axis=axis)
        taps.append(axis + 1)
    return ctx.op("Reduce", (xp,), op=kind, axes=tuple(taps), keep_dim=False)


@converts("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    op = "Mean" if node.op_type == "GlobalAveragePool" else "Max"
    return [ctx.op("Reduce", (x,), op=op, axes=tuple(range(2, len(ctx.dims(x)))),
                   keep_dim=True)]


def _channel(ctx, v, rank):
    """A per-channel [C] vector as [C, 1, ...] for NC... broadcasting."""
    return ctx.reshape(v, (ctx.dims(v)[0],) + (1,) * (rank - 2))


@converts("BatchNormalization")
def batch_norm(ctx, node, ins, attrs):
    if attrs.get("training_mode", 0):
        from .normalization import batch_norm_training

        return batch_norm_training(ctx, node, ins, attrs)
    attrs.get("momentum")
    x = ctx.id(ins[0])
    r = len(ctx.dims(x))
    scale, bias, mean, var = (_channel(ctx, ctx.id(n), r) for n in ins[1:5])
    eps = ctx.like(attrs.get("epsilon", 1e-5), var)
    k = ctx.bin("Div", scale, ctx.act("Sqrt", ctx.bin("Add", var, eps)))
    return [ctx.bin("Add", ctx.bin("Mul", ctx.bin("Sub", x, mean), k), bias)]


@converts("InstanceNormalization", "GroupNormalization")
def group_norm(ctx, node, ins, attrs):
    x, scale, bias = (ctx.id(n) for n in ins[:3])
    c = ctx.dims(x)[1]
    groups = attrs.get("num_groups", c) if node.op_type == "GroupNormalization" else c
    attrs.get("stash_type")
    if ctx.dims(scale)[0] != c:     # opset 18's GroupNormalization: one scale per group
        idx = ctx.const(np.arange(c) // (c // groups))
        scale = ctx.op("Gather", (scale, idx), axis=0)
        bias = ctx.op("Gather", (bias, idx), axis=0)
    return [ctx.op("GroupNorm", (x, scale, bias), num_groups=groups,
                   eps=attrs.get("epsilon", 1e-5))]


@converts("LayerNormalization", "RMSNormalization")
def layer_norm(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    ax = norm_axis(attrs.get("axis", -1), len(dims))
    eps = attrs.get("epsilon", 1e-5)
    attrs.get("stash_type")
    lead, tail = tuple(dims[:ax]), tuple(dims[ax:])
    feat = int(np.prod(tail, dtype=np.int64))
    x2 = ctx.reshape(x, lead + (feat,))
    scale = ctx.op("Expand", (ctx.id(ins[1]),), target_shape=tail)
    scale = ctx.reshape(scale, (feat,))
    if len(ins) > 2 and ins[2]:
        bias = ctx.reshape(ctx.op("Expand", (ctx.id(ins[2]),), target_shape=tail), (feat,))
    else:
        bias = ctx.const(np.zeros(feat, ctx.dt(x).np), ctx.dt(x))
    kind = "LayerNorm" if node.op_type == "LayerNormalization" else "RmsNorm"
    y = ctx.reshape(ctx.op(kind, (x2, scale, bias), axis=-1, eps=eps), dims)
    outs = [y]
    if len(node.output) > 1:        # Mean and InvStdDev, as [*lead, 1, ...]
        stat = lead + (1,) * len(tail)
        mean = ctx.op("Reduce", (x2,), op="Mean", axes=(len(lead),), keep_dim=True)
        d = ctx.bin("Sub", x2, mean)
        var = ctx.op("Reduce", (ctx.bin("Mul", d, d),), op="Mean", axes=(len(lead),),
                     keep_dim=True)
        inv = ctx.act("Rsqrt", ctx.bin("Add", var, ctx.like(eps, var)))
        outs += [ctx.reshape(mean, stat), ctx.reshape(inv, stat)]
    return outs


@converts("LpNormalization")
def lp_norm(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    ax = norm_axis(attrs.get("axis", -1), len(ctx.dims(x)))
    p = attrs.only("p", (1, 2), 2)
    t = ctx.act("Abs", x) if p == 1 else ctx.bin("Mul", x, x)
    s = ctx.op("Reduce", (t,), op="Sum", axes=(ax,), keep_dim=True)
    norm = s if p == 1 else ctx.act("Sqrt", s)
    zero = ctx.cmp("Eq", norm, ctx.like(0, norm))      # ONNX: a zero vector stays zero
    return [ctx.where(zero, ctx.like(0, x), ctx.bin("Div", x, norm))]


@converts("Det")
def det(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    if len(dims) == 2:
        return [ctx.op("Det", (x,))]
    # RLX's Det takes one matrix: a batch is one Det per matrix, restacked
    batch = int(np.prod(dims[:-2]))
    flat = ctx.reshape(x, (batch,) + dims[-2:])
    dets = [ctx.reshape(ctx.op("Det", (ctx.reshape(
        ctx.op("Slice", (flat,), axis=0, start=i, len=1, step=1), dims[-2:]),)), (1,))
        for i in range(batch)]
    y = dets[0] if batch == 1 else ctx.op("Concat", dets, axis=0)
    return [ctx.reshape(y, dims[:-2])]
