"""Lowering of Fft (``_fft_src``): radix-2 Stockham stages for N = 2^m > 16, else direct.

Power-of-two rows run log2(N) launches of one butterfly per work-item, ping-ponging
(re, im) pairs in the accumulation type through two plan scratch buffers; other lengths
(and short rows) run the direct DFT, one output element per work-item (O(N²): correct for
any N, slow for long rows of other lengths). Twiddles are a host table of cos/sin(2π·m/N).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops._spectral_ref import output_scale
from . import memory
from ._fft_src import direct_source, stage_source
from .launch import bind_1d, scalar
from .lowering import Step, lowers

DIRECT_MAX = 16           # rows up to this length run the direct DFT


def _acc(ctx) -> tuple:
    return ("double", np.float64) if ctx.device.fp64 else ("float", np.float32)


@lowers("Fft", (DType.F32, DType.F64, DType.C64))
def _fft(node, ins, ctx):
    dims, dt, a = tuple(ins[0].dims), ins[0].dtype, node.attrs
    n = dims[-1] if dt is DType.C64 else dims[-1] // 2
    rows = math.prod(dims[:-1]) if n else 0
    acc, acc_np = _acc(ctx)
    ang = 2.0 * np.pi * np.arange(max(n, 1)) / max(n, 1)
    tw = memory.upload(ctx.program.context, ctx.queue,
                       np.stack([np.cos(ang), np.sin(ang)], 1).reshape(-1).astype(acc_np))
    sign = scalar(1.0 if a.inverse else -1.0, acc)
    scale = scalar(output_scale(a.norm, max(n, 1), a.inverse), acc)
    if n <= DIRECT_MAX or n & (n - 1):
        name, text = direct_source(dt, acc)
        ref = ctx.kernel(text, name)

        def bind(out, x):
            launch = bind_1d(ref, ctx.device, ctx.queue, rows * n, [
                out.buf, x.buf, tw.buf, scalar(rows), scalar(n), sign, scale])

            def run():
                launch()
            run.keep = (tw,)      # kernel arguments do not keep a buffer alive
            return run
        return Step(bind)
    stages = n.bit_length() - 1
    refs = [ctx.kernel(*reversed(stage_source(dt, acc, s == 0, s == stages - 1)))
            for s in range(stages)]
    bufs = [memory.empty(ctx.program.context, (rows * n * 2,), acc_np) for _ in range(2)]

    def bind_stages(out, x):
        launches = []
        for s, ref in enumerate(refs):
            src = x if s == 0 else bufs[(s - 1) % 2]
            dst = out if s == stages - 1 else bufs[s % 2]
            launches.append(bind_1d(ref, ctx.device, ctx.queue, rows * (n // 2), [
                dst.buf, src.buf, tw.buf, scalar(rows), scalar(n), scalar(1 << s), sign,
                scale]))

        def run():
            for f in launches:
                f()
        run.keep = (tw, *bufs)
        return run
    return Step(bind_stages)
