"""Linear quantization: QuantizeLinear, DequantizeLinear and QLinearMatMul, decomposed.

ONNX's meaning, step for step: quantize is rint(x / scale) (half to even) + zero point,
saturated to the integer type; dequantize is (x - zero point) * scale in f32, cast to
the scale's dtype. Scales and zero points are per tensor, per axis or blocked.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable, dtype_of, norm_axis
from . import converts

QUANT_INTS = (DType.U8, DType.I8, DType.I16, DType.I32)


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _spread(ctx, name, shape, axis, block, what):
    """The scale or zero point ``name`` as a node broadcastable against ``shape``."""
    v = ctx.value(name)
    if v is None and name not in ctx.ids and name not in ctx.weights:
        v = ctx.need(name, what) if name in ctx.static_inputs else None
    if v is None and name in ctx.weights:
        v = ctx.weights[name]
    rank = len(shape)
    if v is not None:
        return ctx.const(_spread_np(np.asarray(v), shape, axis, block))
    x = ctx.id(name)
    dims = ctx.dims(x)
    if block:
        raise Unmappable(f"a blocked {what} computed at run time", "block_size")
    if int(np.prod(dims)) == 1:
        return ctx.reshape(x, ())
    if len(dims) != 1:
        raise Unmappable(f"a {what} of shape {list(dims)} without block_size")
    norm_axis(axis, rank)
    want = [1] * rank
    want[axis] = dims[0]
    return ctx.reshape(x, want)


def _axis(attrs, shape):
    """The quantization axis; ONNX ignores an out-of-range default for per-tensor scales,
    so an axis out of range is an error only where a per-axis operand needs it."""
    a = attrs.get("axis", 1)
    return a % len(shape) if -len(shape) <= a < len(shape) else a


def _spread_np(v, shape, axis, block):
    """ONNX's reshape_input: per tensor, per axis, or blocked (repeated along ``axis``)."""
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if not 0 <= axis < len(shape):
        norm_axis(axis, len(shape))
    if not block:
        if v.ndim != 1 or v.size != shape[axis]:
            raise Unmappable(f"a per-axis operand of shape {list(v.shape)} does not match "
                             f"axis {axis} of {list(shape)}")
        dims = [1] * len(shape)
        dims[axis] = v.size
        return v.reshape(dims)
    if block < 0:
        raise Unmappable(f"block_size={block} is not positive", "block_size")
    r = np.repeat(v, block, axis=axis).take(range(shape[axis]), axis=axis)
    if r.shape != tuple(shape):
        raise Unmappable(f"a blocked operand of shape {list(v.shape)} does not tile "
                         f"{list(shape)} with block_size={block}", "block_size")
    return r


def _int_dtype(ctx, ins, attrs, default):
    """The quantized dtype: the zero point's, else ``output_dtype``, else ``default``."""
    out = attrs.get("output_dtype", 0)
    if _opt(ins, 2):
        dt = ctx.dtype(ins[2])
        if out and dtype_of(out, "output_dtype") is not dt:
            raise Unmappable("output_dtype differs from the zero point's type", "output_dtype")
        return dt
    return dtype_of(out, "QuantizeLinear's output_dtype") if out else default


def saturate(ctx, y, dt: DType):
    """Clamp a float node to ``dt``'s range (NaN to its minimum, as numpy's cast-then-clip
    gives on every CPU ONNX's reference runs on) and cast it."""
    info = np.iinfo(dt.np)
    return ctx.cast(ctx.op("Clamp", (y,), min=float(info.min), max=float(info.max)), dt)


@converts("QuantizeLinear")
def quantize(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    shape = ctx.dims(x)
    axis = _axis(attrs, shape)
    block = attrs.get("block_size", 0)
    attrs.only("saturate", (1,), 1)        # saturate=0 concerns only float8 outputs
    attrs.only("precision", (0,), 0)
    dt = _int_dtype(ctx, ins, attrs, DType.U8)
    if dt not in QUANT_INTS:
        raise Unmappable(f"quantizing to {dt}; RLX maps integer targets only")
    s = _spread(ctx, ins[1], shape, axis, block, "y_scale")
    xf, sf = x, s
    if ctx.dt(x) is not ctx.dt(s):      # numpy promotes x / scale to the wider float
        wide = ctx.dt(x).promote(ctx.dt(s))
        xf, sf = ctx.cast(x, wide), ctx.cast(s, wide)
    r = ctx.cast(ctx.act("Round", ctx.bin("Div", xf, sf)), DType.F64)
    if _opt(ins, 2):
        zp = _spread(ctx, ins[2], shape, axis, block, "y_zero_point")
        r = ctx.bin("Add", r, ctx.cast(zp, DType.F64))
    return [saturate(ctx, r, dt)]


@converts("DequantizeLinear")
def dequantize(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    shape = ctx.dims(x)
    axis = _axis(attrs, shape)
    block = attrs.get("block_size", 0)
    if ctx.dt(x) not in QUANT_INTS:
        raise Unmappable(f"dequantizing {ctx.dt(x)}; RLX maps integer inputs only")
    s = _spread(ctx, ins[1], shape, axis, block, "x_scale")
    out = attrs.get("output_dtype", 0)
    out_dt = dtype_of(out, "output_dtype") if out else ctx.dt(s)
    d = ctx.cast(x, DType.F32)
    if _opt(ins, 2):
        zp = _spread(ctx, ins[2], shape, axis, block, "x_zero_point")
        d = ctx.bin("Sub", d, ctx.cast(zp, DType.F32))
    return [ctx.cast(ctx.bin("Mul", d, ctx.cast(s, DType.F32)), out_dt)]


@converts("QLinearMatMul")
def qlinear_matmul(ctx, node, ins, attrs):
    from .nn import matmul

    a, b = ctx.id(ins[0]), ctx.id(ins[3])
    for name, x in (("a", a), ("b", b)):
        if ctx.dt(x) not in (DType.U8, DType.I8):
            raise Unmappable(f"QLinearMatMul's {name} is {ctx.dt(x)}; ONNX allows 8-bit only")
    sa, sb, sy = (np.asarray(ctx.need(ins[i], "QLinearMatMul's scales")) for i in (1, 4, 6))
    if max(sa.size, sb.size, sy.size) != 1:
        raise Unmappable("per-axis scales in QLinearMatMul (RLX maps per-tensor ones)")
    # ONNX's reference: the int32 product times (sa * sb / sy), taken in the scales' dtype
    # and applied in float64 (numpy promotes int32 with any float array to float64)
    factor = (sa.reshape(()) * sb.reshape(()) / sy.reshape(())).astype(np.float64)

    def centred(x, i):
        xi = ctx.cast(x, DType.I32)
        if not _opt(ins, i):
            return xi
        zp = np.asarray(ctx.need(ins[i], "QLinearMatMul's zero points"))
        if zp.size != 1:
            raise Unmappable("per-axis zero points in QLinearMatMul")
        return ctx.bin("Sub", xi, ctx.scalar(int(zp.reshape(())), DType.I32))

    ctx.ids[node.output[0] + "/a"] = centred(a, 2)
    ctx.ids[node.output[0] + "/b"] = centred(b, 5)
    c = matmul(ctx, node, [node.output[0] + "/a", node.output[0] + "/b"], attrs)[0]
    d = ctx.bin("Mul", ctx.cast(c, DType.F64), ctx.scalar(factor, DType.F64))
    dt = ctx.dt(a)
    if _opt(ins, 7):
        zp = np.asarray(ctx.need(ins[7], "QLinearMatMul's y_zero_point"))
        dt = DType.of(zp)
        d = ctx.bin("Add", d, ctx.scalar(float(zp.reshape(())), DType.F64))
    return [saturate(ctx, ctx.act("Round", d), dt)]
