"""VJP rules of the complex kinds, in RLX's Wirtinger convention: the cotangent of a C64
value ``z = x + i·y`` under a real loss L is ``∂L/∂z̄ = (∂L/∂x + i·∂L/∂y) / 2``."""
from __future__ import annotations

from .vjp import vjp_rule


@vjp_rule("Conjugate")
def vjp_conjugate(ctx, dy):
    """conj is its own VJP (RLX)."""
    return [ctx.g.op("Conjugate", (dy,))]


@vjp_rule("ComplexNormSq")
def vjp_complex_norm_sq(ctx, dy):
    """|z|² = z·z̄: ∂/∂z̄ = z, scaled by the real upstream (RLX's ComplexNormSqBackward)."""
    return [ctx.g.op("ComplexNormSqBackward", (ctx.x[0], dy))]
