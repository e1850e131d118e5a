"""VJP rules of the reductions and scans: Reduce, Softmax, Cumsum, CumProd.

Reduce Max/Min share the cotangent evenly among tied extrema (as JAX and PyTorch);
Reduce Prod uses exclusive products from both ends, so zeros get their exact gradient.
"""
from __future__ import annotations

from ..ir.shape import normalize_axis
from ._build import (binary, broadcast_to_input, cast, expand, inverse_perm, reshape,
                     scalar, static_dims, transpose)
from .vjp import vjp_rule


def _axes(ctx) -> tuple:
    r = ctx.in_shapes[0].rank
    return tuple(sorted(normalize_axis(a, r) for a in ctx.attrs.axes))


@vjp_rule("Reduce")
def vjp_reduce(ctx, dy):
    g, (x,), a = ctx.g, ctx.x, ctx.attrs
    dims = static_dims(g, x, ctx.where)
    axes = _axes(ctx)
    spread = broadcast_to_input(g, dy, dims, axes, a.keep_dim)
    if a.op == "Sum":
        return [spread]
    if a.op == "Mean":
        count = 1
        for ax in axes:
            count *= dims[ax]
        return [binary(g, "Div", spread, scalar(g, max(count, 1), ctx.out_shape.dtype))]
    if a.op in ("Max", "Min"):
        y = broadcast_to_input(g, ctx.y, dims, axes, a.keep_dim)
        hit = cast(g, g.op("Compare", (x, y), op="Eq"), ctx.out_shape.dtype)
        ties = g.op("Reduce", (hit,), op="Sum", axes=axes, keep_dim=True)
        share = binary(g, "Div", hit, expand(g, ties, dims))
        return [binary(g, "Mul", spread, share)]
    if a.op == "Prod":
        return [binary(g, "Mul", spread, _prod_except_self(g, x, dims, axes))]
    raise ctx.fail(f"Reduce {a.op} has no VJP rule")


def _prod_except_self(g, x, dims, axes):
    """For each element, the product of the other elements of its reduced group: the
    group is moved last and flattened, then exclusive CumProds from both ends multiply."""
    kept = [i for i in range(len(dims)) if i not in axes]
    perm = tuple(kept) + tuple(axes)
    moved = transpose(g, x, perm)
    k = 1
    for ax in axes:
        k *= dims[ax]
    lead = tuple(dims[i] for i in kept)
    flat = reshape(g, moved, lead + (k,))
    last = len(lead)
    before = g.op("CumProd", (flat,), axis=last, exclusive=True)
    rev = g.op("Reverse", (flat,), axes=(last,))
    after = g.op("Reverse", (g.op("CumProd", (rev,), axis=last, exclusive=True),),
                 axes=(last,))
    both = binary(g, "Mul", before, after)
    back = reshape(g, both, lead + tuple(dims[ax] for ax in axes))
    return transpose(g, back, inverse_perm(perm))


@vjp_rule("Softmax")
def vjp_softmax(ctx, dy):
    """dx = y·(dy - Σ dy·y) along the axis."""
    g, y = ctx.g, ctx.y
    axis = normalize_axis(ctx.attrs.axis, ctx.out_shape.rank)
    dims = static_dims(g, y, ctx.where)
    dot = g.op("Reduce", (binary(g, "Mul", dy, y),), op="Sum", axes=(axis,), keep_dim=True)
    return [binary(g, "Mul", y, binary(g, "Sub", dy, expand(g, dot, dims)))]


@vjp_rule("Cumsum")
def vjp_cumsum(ctx, dy):
    """``CumsumBackward{axis, exclusive}(dy)``: the reversed (exclusive) running sum."""
    return [ctx.g.op("CumsumBackward", (dy,), axis=ctx.attrs.axis,
                     exclusive=ctx.attrs.exclusive, shape=ctx.in_shapes[0])]


@vjp_rule("CumProd")
def vjp_cumprod(ctx, dy):
    """dx_i = Σ_{j ≥ i} dy_j·y_j / x_i (inclusive; j > i when exclusive). Exact where x
    has no zeros; a zero x_i gets a non-finite gradient (a documented limitation)."""
    g, (x,) = ctx.g, ctx.x
    axis = normalize_axis(ctx.attrs.axis, ctx.out_shape.rank)
    prod = binary(g, "Mul", dy, ctx.y)
    rev = g.op("Reverse", (prod,), axes=(axis,))
    tail = g.op("Reverse", (g.op("Cumsum", (rev,), axis=axis, exclusive=ctx.attrs.exclusive),),
                axes=(axis,))
    return [binary(g, "Div", tail, x)]
