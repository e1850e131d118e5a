"""MeanVarianceNormalization, and BatchNormalization's training mode (batch statistics)."""
from __future__ import annotations

from ..context import norm_axis
from . import converts


def _mean(ctx, x, axes):
    return ctx.op("Reduce", (x,), op="Mean", axes=tuple(axes), keep_dim=True)


@converts("MeanVarianceNormalization")
def mvn(ctx, node, ins, attrs):
    """ONNX's function body: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9)."""
    x = ctx.id(ins[0])
    r = len(ctx.dims(x))
    axes = sorted({norm_axis(a, r) for a in attrs.get("axes", [0, 2, 3])})
    m = _mean(ctx, x, axes)
    var = ctx.bin("Sub", _mean(ctx, ctx.bin("Mul", x, x), axes), ctx.bin("Mul", m, m))
    std = ctx.bin("Add", ctx.act("Sqrt", var), ctx.like(1e-9, x))
    return [ctx.bin("Div", ctx.bin("Sub", x, m), std)]


def batch_norm_training(ctx, node, ins, attrs):
    """training_mode=1: normalize with the batch's mean and (population) variance; the
    running statistics come out blended by ``momentum``, as ONNX's reference does."""
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    axes = [0] + list(range(2, len(dims)))
    shaped = (dims[1],) + (1,) * (len(dims) - 2)
    m = _mean(ctx, x, axes)
    d = ctx.bin("Sub", x, m)
    var = _mean(ctx, ctx.bin("Mul", d, d), axes)
    scale, bias = (ctx.reshape(ctx.id(n), shaped) for n in ins[1:3])
    eps = ctx.like(attrs.get("epsilon", 1e-5), x)
    y = ctx.bin("Add", ctx.bin("Div", ctx.bin("Mul", scale, d),
                               ctx.act("Sqrt", ctx.bin("Add", var, eps))), bias)
    mom = attrs.get("momentum", 0.9)
    outs = [y]
    for run, cur in ((ins[3], m), (ins[4], var)):
        cur = ctx.reshape(cur, (dims[1],))
        old = ctx.bin("Mul", ctx.id(run), ctx.like(mom, cur))
        outs.append(ctx.bin("Add", old, ctx.bin("Mul", cur, ctx.like(1 - mom, cur))))
    return outs
