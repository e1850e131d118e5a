"""The JVP of Eigh and EighBatch in closed form (first-order perturbation theory).

Their VJP emits RLX's EighBackward kinds, which have no VJP of their own, so the JVP
derived from the VJP is not available; this rule is the direct one. With the packed
output ``[λ ∥ U]`` and the tangent ``T`` of A read as symmetric from its lower triangle
(``Ts = tril(T) + tril(T, -1)ᵀ``), ``W = Uᵀ·Ts·U``: ``λ̇ = diag(W)`` and
``U̇ = U·(F ∘ W)``, with ``F_ij = 1/(λ_j − λ_i)`` off the diagonal and 0 where the pair
is repeated (``|λ_j − λ_i| <= max(1, max|λ|)·1e-9``, EighBackward's tie rule).
"""
from __future__ import annotations

import numpy as np

from ._build import binary, constant, expand, reduce_sum, reshape, scalar, swap_last_two, unary
from .jvp import jvp_rule


def _split(g, y: int, n: int):
    """λ ``[..., n]`` and U ``[..., n, n]`` of the packed output."""
    s = g.shape(y)
    ax, lead = s.rank - 1, s.dims[:-1]
    lam = g.op("Narrow", (y,), axis=ax, start=0, len=n)
    u = g.op("Narrow", (y,), axis=ax, start=n, len=n * n)
    return lam, reshape(g, u, lead + (n, n))


def _gaps(g, lam: int, n: int) -> int:
    """F: 1/(λ_j − λ_i) off the diagonal, 0 on it and on repeated pairs."""
    dt = g.shape(lam).dtype
    lead = g.shape(lam).dims[:-1]
    full = lead + (n, n)
    row = expand(g, reshape(g, lam, lead + (1, n)), full)
    col = expand(g, reshape(g, lam, lead + (n, 1)), full)
    diff = binary(g, "Sub", row, col)
    top = g.op("Reduce", (unary(g, "Abs", lam),), op="Max", axes=(len(lead),), keep_dim=True)
    tol = binary(g, "Mul", binary(g, "Max", top, scalar(g, 1.0, dt)), scalar(g, 1e-9, dt))
    tol = expand(g, reshape(g, tol, lead + (1, 1)), full)
    apart = g.op("Compare", (unary(g, "Abs", diff), tol), op="Gt")
    one, zero = scalar(g, 1.0, dt), scalar(g, 0.0, dt)
    safe = g.op("Where", (apart, diff, expand(g, one, full)))
    return g.op("Where", (apart, binary(g, "Div", expand(g, one, full), safe),
                          expand(g, zero, full)))


@jvp_rule("Eigh", "EighBatch")
def jvp_eigh(ctx, ts):
    (t,) = ts
    g, y = ctx.g, ctx.y
    n = ctx.in_shapes[0].dims[-1]
    dt = ctx.out_shape.dtype
    lam, u = _split(g, y, n)
    low = g.op("Trilu", (t,), upper=False, diagonal=0)
    strict = g.op("Trilu", (t,), upper=False, diagonal=-1)
    ts_ = binary(g, "Add", low, swap_last_two(g, strict))
    w = g.op("MatMul", (g.op("MatMul", (swap_last_two(g, u), ts_)), u))
    eye = constant(g, np.eye(n), dt, (n, n))
    dlam = reduce_sum(g, binary(g, "Mul", w, eye), (g.shape(w).rank - 1,), keep_dim=False)
    du = g.op("MatMul", (u, binary(g, "Mul", _gaps(g, lam, n), w)))
    lead = ctx.out_shape.dims[:-1]
    flat = reshape(g, du, lead + (n * n,))
    return g.op("Concat", (dlam, flat), axis=len(lead))
