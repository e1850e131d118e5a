"""Batching rules of the products and solves: MatMul, DotGeneral, DenseSolve,
BatchedDenseSolve.

MatMul broadcasts its batch prefixes, so the batch becomes a leading prefix axis and an
unbatched operand (a shared weight) broadcasts against it, as in RLX. DotGeneral names its
axes: a batch carried by both sides joins the batch lists, one carried by a single side is
just another free axis of that side. DenseSolve becomes BatchedDenseSolve (as RLX; a
shared operand is broadcast to every example); BatchedDenseSolve folds the new batch into
its own.
"""
from __future__ import annotations

from ._build import reshape
from ._batching import batch_rule, merge_leading, shift, split_leading


@batch_rule("MatMul")
def batch_matmul(ctx):
    prefix = max(s.rank for s in ctx.in_shapes) - 2
    ins = []
    for i, s in enumerate(ctx.in_shapes):
        if not ctx.batched(i):
            ins.append(ctx.x[i])
            continue
        x = ctx.moved(i, 0)
        short = prefix - (s.rank - 2)
        if short:       # size-1 prefix axes so the batch lines up with the other side's
            x = reshape(ctx.g, x, (ctx.size,) + (1,) * short + tuple(ctx.static(x)[1:]))
        ins.append(x)
    return ctx.emit("MatMul", ins, 0)


def _free(rank: int, contracting, batch) -> list:
    return [i for i in range(rank) if i not in contracting and i not in batch]


@batch_rule("DotGeneral")
def batch_dot_general(ctx):
    a = ctx.attrs
    dl, dr = ctx.bdims
    lb, lc, rb, rc = a.lhs_batch, a.lhs_contracting, a.rhs_batch, a.rhs_contracting
    if dl is not None:
        lb, lc = tuple(shift(i, dl) for i in lb), tuple(shift(i, dl) for i in lc)
    if dr is not None:
        rb, rc = tuple(shift(i, dr) for i in rb), tuple(shift(i, dr) for i in rc)
    if dl is not None and dr is not None:
        payload = ctx.replace(lhs_batch=(dl,) + lb, rhs_batch=(dr,) + rb,
                              lhs_contracting=lc, rhs_contracting=rc)
        return ctx.emit("DotGeneral", ctx.x, 0, payload)
    payload = ctx.replace(lhs_batch=lb, rhs_batch=rb, lhs_contracting=lc, rhs_contracting=rc)
    l_rank = ctx.in_shapes[0].rank + (dl is not None)
    lfree = _free(l_rank, lc, lb)
    if dl is not None:                  # a free lhs axis: output batch dims, then lhs free
        return ctx.emit("DotGeneral", ctx.x, len(lb) + lfree.index(dl), payload)
    rfree = _free(ctx.in_shapes[1].rank + 1, rc, rb)
    return ctx.emit("DotGeneral", ctx.x, len(lb) + len(lfree) + rfree.index(dr), payload)


@batch_rule("DenseSolve")
def batch_dense_solve(ctx):
    """One solve per example: ``BatchedDenseSolve`` of A and b, each batched at 0."""
    return ctx.emit("BatchedDenseSolve", (ctx.moved(0, 0), ctx.moved(1, 0)), 0)


@batch_rule("BatchedDenseSolve")
def batch_batched_dense_solve(ctx):
    """The example batch folds into the solve's own batch and back out."""
    a = merge_leading(ctx.g, ctx.moved(0, 0), ctx.where)
    b = merge_leading(ctx.g, ctx.moved(1, 0), ctx.where)
    x = ctx.g.op("BatchedDenseSolve", (a, b))
    return split_leading(ctx.g, x, ctx.size, ctx.where), 0
