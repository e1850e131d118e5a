"""VJP rule of SplineActivation: RLX's fused backward kinds, one per operand."""
from __future__ import annotations

from .vjp import vjp_rule


@vjp_rule("SplineActivation")
def vjp_spline_activation(ctx, dy):
    g, a = ctx.g, ctx.attrs
    x, coeff = ctx.x
    fields = dict(num_basis=a.num_basis, grid_min=a.grid_min, grid_max=a.grid_max)
    return [g.op("SplineActivationBackwardX", (x, coeff, dy), **fields),
            g.op("SplineActivationBackwardCoeff", (x, dy), **fields)]
