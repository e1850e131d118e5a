"""The JVP of SplineActivation in closed form.

Its VJP emits RLX's spline backward kinds, which have no VJP of their own, so the JVP
derived from the VJP is not available. y is linear in coeff, and BackwardX with the x
tangent as its upstream is `ẋ·∂y/∂x`, so `ẏ = BackwardX(x, coeff, ẋ) + y(x, ċoeff)`.
"""
from __future__ import annotations

from ._build import binary
from .jvp import jvp_rule


@jvp_rule("SplineActivation")
def jvp_spline_activation(ctx, ts):
    tx, tcoeff = ts
    g, a = ctx.g, ctx.attrs
    x, coeff = ctx.x
    fields = dict(num_basis=a.num_basis, grid_min=a.grid_min, grid_max=a.grid_max)
    parts = []
    if tx is not None:
        parts.append(g.op("SplineActivationBackwardX", (x, coeff, tx), **fields))
    if tcoeff is not None:
        parts.append(g.op("SplineActivation", (x, tcoeff), **fields))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else binary(g, "Add", parts[0], parts[1])
