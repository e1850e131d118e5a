"""VJP rule of KvAppend: the gradient of its lowering `concat([narrow(cache), row])`."""
from __future__ import annotations

from ._build import zeros
from .vjp import vjp_rule


@vjp_rule("KvAppend")
def vjp_kv_append(ctx, dy):
    """dcache: dy's first `pos` rows, zeros for the unread rows `pos..cap`; drow: dy's last."""
    g, a = ctx.g, ctx.attrs
    cache = ctx.in_shapes[0]
    cap = int(cache.dims[a.axis])
    drow = g.op("Narrow", (dy,), axis=a.axis, start=a.pos, len=1)
    parts = [g.op("Narrow", (dy,), axis=a.axis, start=0, len=a.pos)] if a.pos else []
    parts.append(zeros(g, cache.with_dim(a.axis, cap - a.pos)))
    dcache = parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=a.axis)
    return [dcache, drow]
