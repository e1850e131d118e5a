"""The JVPs of Eigh, EighBatch and LogMel in closed form.

Their VJPs emit RLX's EighBackward kinds and LogMelBackward, which have no VJP of their
own, so the JVP derived from the VJP is not available; these rules are the direct ones.
Eigh's is first-order perturbation theory. With the packed
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


def _bins(g, spec: int, start: int, n: int) -> int:
    return g.op("Narrow", (spec,), axis=g.shape(spec).rank - 1, start=start, len=n)


@jvp_rule("LogMel")
def jvp_log_mel(ctx, ts):
    """The linear map LogMelBackward transposes: ṗ = 2·(re·ṙe + im·i̇m) on the one-sided
    bins, ṁel = ṗ·filtersᵀ, then ṁel / (mel·ln 10) / 4 for live mels off the frame floor
    (mel > 1e-10 and the compressed value more than 1e-6 above it), 0 elsewhere."""
    t = ts[0]
    if t is None:
        return None
    g, (spec, filters) = ctx.g, ctx.x
    dt = ctx.out_shape.dtype
    n_fft = ctx.in_shapes[0].dims[-1] // 2
    nb = n_fft // 2 + 1
    two = scalar(g, 2.0, dt)
    re, im = _bins(g, spec, 0, nb), _bins(g, spec, n_fft, nb)
    power = binary(g, "Add", binary(g, "Mul", re, re), binary(g, "Mul", im, im))
    dpow = binary(g, "Mul", two, binary(g, "Add", binary(g, "Mul", re, _bins(g, t, 0, nb)),
                                        binary(g, "Mul", im, _bins(g, t, n_fft, nb))))
    lead = ctx.in_shapes[0].dims[:-1]
    rows = int(np.prod(lead)) if lead else 1
    ft = swap_last_two(g, filters)
    mel = g.op("MatMul", (reshape(g, power, (rows, nb)), ft))
    dmel = g.op("MatMul", (reshape(g, dpow, (rows, nb)), ft))
    mel, dmel = reshape(g, mel, ctx.out_shape.dims), reshape(g, dmel, ctx.out_shape.dims)
    live = g.op("Compare", (mel, scalar(g, 1e-10, dt)), op="Gt")
    y = ctx.y
    top = g.op("Reduce", (y,), op="Max", axes=(ctx.out_shape.rank - 1,), keep_dim=True)
    above = binary(g, "Mul", binary(g, "Sub", y, binary(g, "Sub", top, two)),
                   scalar(g, 4.0, dt))
    off_floor = g.op("Compare", (unary(g, "Abs", above), scalar(g, 1e-6, dt)), op="Gt")
    keep = g.op("Binary", (live, off_floor), op="BitAnd")
    safe = g.op("Where", (live, mel, expand(g, scalar(g, 1.0, dt), ctx.out_shape.dims)))
    k = scalar(g, 0.25 / np.log(10.0), dt)
    d = binary(g, "Mul", binary(g, "Div", dmel, safe), k)
    return g.op("Where", (keep, d, expand(g, scalar(g, 0.0, dt), ctx.out_shape.dims)))
