"""Lowering of Sort and ArgSort (``_sort_src``): one line per work-item, stable.

The input is read as [outer, n, inner]; each line is merge-sorted in global scratch (two
runs of n values and indices per line, freed with the plan). Every float and integer
dtype runs natively; f64 only on devices with cl_khr_fp64 (the table filters it).
"""
from __future__ import annotations

import math

import numpy as np

from . import memory
from ._sort_src import BUF, CMP, sort_source
from .launch import bind_1d, scalar
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


@lowers("Sort", DTYPES)
def _sort(node, ins, ctx):
    return _lower(node, ins, ctx, False)


@lowers("ArgSort", DTYPES)
def _argsort(node, ins, ctx):
    return _lower(node, ins, ctx, True)
