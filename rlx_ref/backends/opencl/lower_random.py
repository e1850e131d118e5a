"""Lowering of RngUniform and RngNormal (``_random_src``): Philox blocks on the device.

The stream key is fixed at lowering (``combine_seed(42, key)``), each work-item computes
its block from the counter, so the output is bit-exact with the oracle for any launch
size. RngNormal takes ln and cos in double; a device without cl_khr_fp64 runs it through
the declared host path instead (its f32 ln/cos could not match the oracle's rounding).
"""
from __future__ import annotations

import math

from ...ir.dtype import DType
from ...ops import _philox
from ._random_src import normal_source, uniform_source
from .launch import bind_1d, scalar
from .lowering import Step, lowers

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


@lowers("RngUniform", F32)
def _uniform(node, ins, ctx):
    return _fill(node, ctx, uniform_source(), 4, node.attrs.low, node.attrs.high)


@lowers("RngNormal", F32)
def _normal(node, ins, ctx):
    if not ctx.device.fp64:
        from .lower_host import lower_host     # imported late: it declares what is left
        return lower_host(node, ins, ctx)
    return _fill(node, ctx, normal_source(), 2, node.attrs.mean, node.attrs.scale)
