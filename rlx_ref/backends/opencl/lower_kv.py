"""Lowering of KvAppend (``_kv_src``): one output element per work-item, raw bits.

The output is the cache's first ``pos`` rows along ``axis`` followed by the row; both are
copied as words of the element size, so every dtype runs natively and exactly.
"""
from __future__ import annotations

import math

from ...ir.dtype import DType
from ._kv_src import WORD, kv_append_source
from .launch import bind_1d, scalar
from .lowering import Step, lowers

DTYPES = tuple(d for d in DType if d.size_bytes in WORD)


@lowers("KvAppend", DTYPES)
def _kv_append(node, ins, ctx):
    cache, ax, pos = tuple(ins[0].dims), node.attrs.axis, node.attrs.pos
    inner = math.prod(cache[ax + 1:])
    total = math.prod(node.shape.dims)
    name, text = kv_append_source(node.shape.dtype.size_bytes)
    ref = ctx.kernel(text, name)

    def bind(out, c, row):
        return bind_1d(ref, ctx.device, ctx.queue, total, [
            out.buf, c.buf, row.buf, scalar(total), scalar(cache[ax]), scalar(pos),
            scalar(max(1, inner))])
    return Step(bind)
