"""Lowering of RngUniform, RngNormal (``_random_src``) and Sample (``_sample_src``).

The stream key is fixed at lowering (``combine_seed(42, key)``), each work-item computes
its block from the counter, so the output is bit-exact with the oracle for any launch
size. RngNormal takes ln and cos in double; a device without cl_khr_fp64 runs it through
the declared host path instead (its f32 ln/cos could not match the oracle's rounding),
as it runs Sample (whose exp and quotients need the same). Sample runs one row per
work-item with its probabilities and sort runs in global scratch.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops import _philox
from ...ops._sample_row import clamp_temperature, sample_seed
from . import memory
from ._random_src import normal_source, uniform_source
from ._sample_src import sample_source
from .launch import bind_1d, scalar
from .lowering import ERR_NAN_SORT, Step, lowers

F32 = (DType.F32,)


def _key(key: int) -> tuple:
    lo, hi = _philox.seed_key(_philox.combine_seed(_philox.DEFAULT_GLOBAL_SEED, key))
    return scalar(lo, "uint"), scalar(hi, "uint")


def _fill(node, ctx, source, per_item: int, a, b) -> Step:
    name, text = source
    ref = ctx.kernel(text, name)
    n = math.prod(node.shape.dims)
    k0, k1 = _key(node.attrs.key)

    def bind(out, *template):
        return bind_1d(ref, ctx.device, ctx.queue, -(-n // per_item), [
            out.buf, scalar(n), k0, k1, scalar(a, "float"), scalar(b, "float")])
    return Step(bind)


def _host(node, ins, ctx):
    """The reference on the host, named in the step's note (lower_host is imported late:
    importing it declares the host path of every kind still unclaimed)."""
    from .lower_host import lower_host

    step = lower_host(node, ins, ctx)
    step.note = "host: the device lacks cl_khr_fp64, which the kernel's rounding needs"
    return step


@lowers("RngUniform", F32)
def _uniform(node, ins, ctx):
    return _fill(node, ctx, uniform_source(), 4, node.attrs.low, node.attrs.high)


@lowers("RngNormal", F32)
def _normal(node, ins, ctx):
    if not ctx.device.fp64:     # f32 ln/cos could not match the oracle's rounding
        return _host(node, ins, ctx)
    return _fill(node, ctx, normal_source(), 2, node.attrs.mean, node.attrs.scale)


@lowers("Sample", F32)
def _sample(node, ins, ctx):
    if not ctx.device.fp64:     # exp and quotients need double rounding
        return _host(node, ins, ctx)
    a, dims = node.attrs, tuple(ins[0].dims)
    v = dims[-1]
    batch = math.prod(dims[:-1]) if len(dims) == 2 else 1
    lo, hi = _philox.seed_key(sample_seed(a.seed))
    temp = clamp_temperature(a.temperature)
    use_p = int(bool(np.float32(a.top_p) < np.float32(1.0)))
    name, text = sample_source(ERR_NAN_SORT)
    ref = ctx.kernel(text, name)
    fs = memory.empty(ctx.program.context, (max(1, batch * 3 * v),), np.float32)
    ints = memory.empty(ctx.program.context, (max(1, batch * 2 * v),), np.int32)
    zero = memory.upload(ctx.program.context, ctx.queue, np.zeros(max(1, batch), np.float32))

    def bind(out, x):
        if v == 0:              # one id per row, 0 (as the oracle) when the vocabulary is empty
            def fill():
                if batch:
                    out.copy_from(ctx.queue, zero)
            return fill
        launch = bind_1d(ref, ctx.device, ctx.queue, batch, [
            out.buf, x.buf, fs.buf, ints.buf, scalar(batch), scalar(v),
            scalar(lo, "uint"), scalar(hi, "uint"), scalar(a.top_k), scalar(a.top_p, "float"),
            scalar(use_p, "int"), scalar(temp, "float"), ctx.errors.array.buf,
            scalar(ctx.err_code, "int")], local=64)

        def run():
            launch()
        run.keep = (fs, ints, zero)   # kernel arguments do not keep a buffer alive
        return run
    return Step(bind)
