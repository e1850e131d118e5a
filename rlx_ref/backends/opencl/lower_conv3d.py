"""Lowering of Conv3d and Interpolate3d (``_conv3d_src``): one output per work-item.

Conv3d is a direct sum over channels and taps (positions in the padding are skipped), in
f32 for f32/f16/bf16 and f64 for f64; Interpolate3d copies raw words, any dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from . import memory
from ._conv3d_src import conv3d_source, interpolate3d_source
from ._kv_src import WORD
from .launch import bind_1d, scalar
from .lowering import FLOAT_DTYPES, SIXTEEN, Step, lowers


def _geo(ctx, values, dtype):
    return memory.upload(ctx.program.context, ctx.queue, np.array(values, dtype))


@lowers("Conv3d", FLOAT_DTYPES + SIXTEEN)
def _conv3d(node, ins, ctx):
    x, w, a = tuple(ins[0].dims), tuple(ins[1].dims), node.attrs
    o = tuple(node.shape.dims)
    geo = _geo(ctx, list(x[1:]) + [o[1]] + list(o[2:]) + list(w[2:]) + list(a.stride)
               + list(a.padding) + list(a.dilation) + [a.groups], np.int32)
    total = math.prod(o)
    name, text = conv3d_source(node.shape.dtype)
    ref = ctx.kernel(text, name)

    def bind(out, xs, ws):
        launch = bind_1d(ref, ctx.device, ctx.queue, total, [
            out.buf, xs.buf, ws.buf, geo.buf, scalar(total)])

        def run():
            launch()
        run.keep = (geo,)         # kernel arguments do not keep a buffer alive
        return run
    return Step(bind)


@lowers("Interpolate3d", tuple(d for d in DType if d.size_bytes in WORD))
def _interpolate3d(node, ins, ctx):
    x, o = tuple(ins[0].dims), tuple(node.shape.dims)
    geo = _geo(ctx, list(x[2:]) + list(o[2:]), np.int64)
    total = math.prod(o)
    name, text = interpolate3d_source(node.shape.dtype.size_bytes)
    ref = ctx.kernel(text, name)

    def bind(out, xs):
        launch = bind_1d(ref, ctx.device, ctx.queue, total, [
            out.buf, xs.buf, geo.buf, scalar(total)])

        def run():
            launch()
        run.keep = (geo,)
        return run
    return Step(bind)
