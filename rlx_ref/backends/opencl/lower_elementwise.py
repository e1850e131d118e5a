"""Lowering of the elementwise kinds and ElementwiseRegion: one generated kernel per node.

Standalone ops are one-step chains; a region is its chain, read by modulus broadcast as
RLX's fusion pass marked it.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops.region import walk_chain
from ..codegen.chain import chain_steps, read_mode
from . import memory
from .ew_render import render
from .launch import bind_1d, scalar
from .lowering import BASE_DTYPES, SIXTEEN, Step, lowers
from .variant_table import use


def lower_chain(node, ins, ctx) -> Step:
    steps = chain_steps(node)
    region = node.attrs if node.kind == "ElementwiseRegion" else None
    in_dts = [s.dtype for s in ins]
    step_dts = walk_chain(list(node.attrs.chain), in_dts) if region else [node.shape.dtype]
    step_dts = list(step_dts[:-1]) + [node.shape.dtype]
    out_dims = tuple(node.shape.dims)
    prologue = region is not None and region.prologue == "ResizeNearest2x"
    modes, extras = [], []
    for i, s in enumerate(ins):
        if prologue and i == region.prologue_input:
            m, st = "up2", None
            use("ew.read.up2")
        else:
            m, st = read_mode(tuple(s.dims), out_dims, region, i)
        use(f"ew.read.{m}")
        modes.append(m)
        extras.append(st if m == "strided" else (math.prod(s.dims) if m == "mod" else None))
    name, source = render(steps, in_dts, step_dts, modes)
    ref = ctx.kernel(source, name)
    n = math.prod(out_dims)
    rt_ctx = ctx.program.context
    dims = memory.upload(rt_ctx, ctx.queue, np.array(out_dims or (1,), np.int64))
    strided = {i: memory.upload(rt_ctx, ctx.queue, st) for i, st in enumerate(extras)
               if modes[i] == "strided"}
    err, code = ctx.errors.array, ctx.err_code

    def bind(out, *xs):
        args = [out.buf]
        for i, x in enumerate(xs):
            args.append(x.buf)
            if modes[i] == "strided":
                args.append(strided[i].buf)
            elif modes[i] == "mod":
                args.append(scalar(max(extras[i], 1)))
        args += [scalar(n), dims.buf, scalar(len(out_dims) or 1, "int"), err.buf,
                 scalar(code, "int")]
        return bind_1d(ref, ctx.device, ctx.queue, n, args)
    return Step(bind)


for _kind in ("Activation", "Binary", "Compare", "Cast", "StopGradient", "Where", "Fma",
              "Clamp", "ElementwiseRegion"):
    lowers(_kind, BASE_DTYPES + (DType.F64,) + SIXTEEN)(lower_chain)
