"""Lowering of Sort and ArgSort (``_sort_src``): stable, NaN ranked above +inf.

The input is read as [outer, n, inner]. GPU style, for lines whose (value, index) pairs fit
the local-memory budget: a work-group per line runs a bitonic network ordered by value then
source index (so the result is the stable sort). Otherwise one line per work-item is
merge-sorted in global scratch (two runs of n values and indices per line, plan-owned).
Every float and integer dtype runs natively; f64 only on devices with cl_khr_fp64.
"""
from __future__ import annotations

import math

import numpy as np

from . import memory
from ._reduce_c import gpu_style
from ._sort_src import BUF, CMP, group_pad, sort_group_source, sort_source
from .launch import bind_1d, bind_nd, local_size, scalar
from .lowering import Step, lowers

DTYPES = tuple(BUF)
_NP = {"float": np.float32, "double": np.float64, "int": np.int32, "long": np.int64,
       "uint": np.uint32}


def _lower(node, ins, ctx, arg: bool) -> Step:
    dims, a = tuple(ins[0].dims), node.attrs
    dt = ins[0].dtype
    n = dims[a.axis]
    inner = math.prod(dims[a.axis + 1:])
    lines = math.prod(dims) // n if n else 0
    width = group_pad(n)
    if gpu_style(ctx.device) and width * (_NP[CMP[dt]]().itemsize + 4) <= _local_budget(ctx):
        return _lower_group(ctx, dt, bool(a.descending), arg, lines, n, inner, width)
    name, text = sort_source(dt, bool(a.descending), arg)
    ref = ctx.kernel(text, name)
    cells = max(1, lines * 2 * n)
    sv = memory.empty(ctx.program.context, (cells,), _NP[CMP[dt]])
    si = memory.empty(ctx.program.context, (cells,), np.int32)

    def bind(out, x):
        launch = bind_1d(ref, ctx.device, ctx.queue, lines, [
            out.buf, x.buf, sv.buf, si.buf, scalar(lines), scalar(n), scalar(inner)],
            local=64)

        def run():
            launch()
        run.keep = (sv, si)       # kernel arguments do not keep a buffer alive
        return run
    return Step(bind)


def _local_budget(ctx) -> int:
    """Local-memory bytes a work-group line may take (half the device's, at most 16 KiB)."""
    return min(16 << 10, ctx.device.local_mem // 2)


def _lower_group(ctx, dt, descending: bool, arg: bool, lines, n, inner, width) -> Step:
    """GPU style: a work-group per line, bitonic over (value, index) in local memory."""
    name, text = sort_group_source(dt, descending, arg, width)
    ref = ctx.kernel(text, name)
    lsz = min(width // 2, local_size(ctx.device))

    def bind(out, x):
        return bind_nd(ref, ctx.queue, (lines * lsz,), (lsz,), [
            out.buf, x.buf, scalar(n), scalar(inner)])
    return Step(bind)


@lowers("Sort", DTYPES)
def _sort(node, ins, ctx):
    return _lower(node, ins, ctx, False)


@lowers("ArgSort", DTYPES)
def _argsort(node, ins, ctx):
    return _lower(node, ins, ctx, True)
