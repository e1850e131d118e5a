"""VJP rules of the products and solves: MatMul, DenseSolve, BatchedDenseSolve.

(DotGeneral is decomposed into Transpose/Reshape/MatMul before differentiation.)
"""
from __future__ import annotations

from ._build import reshape, swap_last_two, unary, unbroadcast
from .vjp import vjp_rule


@vjp_rule("MatMul")
def vjp_matmul(ctx, dy):
    """y = a @ b: da = dy @ bᵀ, db = aᵀ @ dy, summed over broadcast batch axes."""
    g, (a, b) = ctx.g, ctx.x
    da = g.op("MatMul", (dy, swap_last_two(g, b)))
    db = g.op("MatMul", (swap_last_two(g, a), dy))
    return [unbroadcast(g, da, ctx.in_shapes[0]), unbroadcast(g, db, ctx.in_shapes[1])]


def _solve_grads(ctx, dy, batched: bool):
    """x = A⁻¹ b: db = A⁻ᵀ dy (one more solve), dA = -db xᵀ."""
    g, a = ctx.g, ctx.x[0]
    lead = 1 if batched else 0
    kind = "BatchedDenseSolve" if batched else "DenseSolve"
    db = g.op(kind, (swap_last_two(g, a), dy))
    vector = ctx.in_shapes[1].rank == 1 + lead       # b is [.., N], not [.., N, K]
    if vector:
        col = reshape(g, db, g.shape(db).dims + (1,))
        row = reshape(g, ctx.y, g.shape(ctx.y).dims[:-1] + (1, g.shape(ctx.y).dims[-1]))
        da = g.op("MatMul", (col, row))
    else:
        da = g.op("MatMul", (db, swap_last_two(g, ctx.y)))
    return [unary(g, "Neg", da), db]


@vjp_rule("DenseSolve")
def vjp_dense_solve(ctx, dy):
    return _solve_grads(ctx, dy, batched=False)


@vjp_rule("BatchedDenseSolve")
def vjp_batched_dense_solve(ctx, dy):
    return _solve_grads(ctx, dy, batched=True)
