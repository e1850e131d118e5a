"""VJP rule of SynthMatMul: RLX's fused SynthMatMulBackward, one node per gradient (the
u8 indices get none)."""
from __future__ import annotations

from .vjp import vjp_rule


@vjp_rule("SynthMatMul")
def vjp_synth_matmul(ctx, dy):
    g, kind = ctx.g, ctx.attrs.kind
    x, idx, cb = ctx.x
    return [g.op("SynthMatMulBackward", (x, idx, cb, dy), kind=kind, wrt="Dx"), None,
            g.op("SynthMatMulBackward", (x, idx, cb, dy), kind=kind, wrt="Codebook")]
