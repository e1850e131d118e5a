"""Lowering of the elementwise kinds and ElementwiseRegion: one generated kernel per node.

A standalone op is a one-step chain, a region is its chain; either way the node is one
grid-stride kernel reading its inputs where they are (broadcasts by index, never
materialized) and writing the output once.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops.region import walk_chain
from ..codegen.chain import chain_steps, read_mode
from .device import DeviceConst, device_dtype, launch_shape
from .ew_render import render
from .kernels import Launch, array_type, compile_kernel, int_type
from .lowering import ALL_REAL, SIXTEEN_NOTE, Step, lowers

_INT_CHECKED = ("Div", "Mod", "Pow")


def chain_launch(steps, in_dtypes, step_dtypes, modes):
    """The Launch of a rendered chain (argument types in call order)."""
    name, source = render(steps, in_dtypes, step_dtypes, modes)
    kernel = compile_kernel(name, source)
    i64 = array_type(np.int64)
    types = [array_type(device_dtype(step_dtypes[-1]))]
    for m, dt in zip(modes, in_dtypes):
        types.append(array_type(device_dtype(dt)))
        if m == "strided":
            types.append(i64)
    types += [i64, array_type(np.int32), int_type()]
    return Launch(kernel, tuple(types))


def cast_launch(src: DType, dst: DType):
    """A flat Cast kernel ``src`` → ``dst`` (used around kernels that compute in f32/f64)."""
    from ...ops.elementwise import CastAttrs

    steps = [("Cast", CastAttrs(dst), [("Input", 0)])]
    launch = chain_launch(steps, [src], [dst], ["full"])
    dims = DeviceConst(np.array([1], np.int64))

    def run(out, x, err):
        if out.size:
            blocks, threads = launch_shape(out.size)
            launch(blocks, threads, out, x, dims.get(), err, 0)
    return launch, run


def lower_chain(node, ins, ctx) -> Step:
    steps = chain_steps(node)
    region = node.attrs if node.kind == "ElementwiseRegion" else None
    in_dts = [s.dtype for s in ins]
    step_dts = walk_chain(list(node.attrs.chain), in_dts) if region else [node.shape.dtype]
    out_dims = tuple(node.shape.dims)
    prologue = region is not None and region.prologue == "ResizeNearest2x"
    modes, strides = [], []
    for i, s in enumerate(ins):
        if prologue and i == region.prologue_input:
            m, st = "near2x", None
        else:
            m, st = read_mode(tuple(s.dims), out_dims, region, i)
        modes.append(m)
        strides.append(DeviceConst(st) if st is not None else None)
    launch = chain_launch(steps, in_dts, step_dts, modes)
    dims = DeviceConst(np.array(out_dims or (1,), np.int64))
    n = math.prod(out_dims)
    blocks, threads = launch_shape(n)
    err, tag = ctx.err, ctx.tag
    fallible = any(kind == "Binary" and attrs.op in _INT_CHECKED and not in_dt.is_float
                   for (kind, attrs, _), in_dt in zip(steps, step_dts))

    def run(out, *xs):
        if not n:
            return
        args = [out]
        for x, st in zip(xs, strides):
            args.append(x)
            if st is not None:
                args.append(st.get())
        launch(blocks, threads, *args, dims.get(), err.get(), tag)
    return Step(run, [launch], fallible=fallible)


for _kind in ("Activation", "Binary", "Compare", "Cast", "StopGradient", "Where", "Fma",
              "Clamp", "ElementwiseRegion"):
    lowers(_kind, ALL_REAL, reason=SIXTEEN_NOTE)(lower_chain)
