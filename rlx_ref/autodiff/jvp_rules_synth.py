"""The JVP of SynthMatMul in closed form: it is bilinear in (x, codebook), so
`ẏ = SynthMatMul(ẋ, idx, cb) + SynthMatMul(x, idx, ċb)` (its VJP's backward kinds have no
VJP of their own, so the derived JVP is not available)."""
from __future__ import annotations

from ._build import binary
from .jvp import jvp_rule


@jvp_rule("SynthMatMul")
def jvp_synth_matmul(ctx, ts):
    tx, _, tcb = ts
    g, kind = ctx.g, ctx.attrs.kind
    x, idx, cb = ctx.x
    parts = []
    if tx is not None:
        parts.append(g.op("SynthMatMul", (tx, idx, cb), kind=kind))
    if tcb is not None:
        parts.append(g.op("SynthMatMul", (x, idx, tcb), kind=kind))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else binary(g, "Add", parts[0], parts[1])
