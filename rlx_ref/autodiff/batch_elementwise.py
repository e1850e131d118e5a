"""Batching rules of the elementwise kinds: Binary, Compare, Where, Fma, Activation, Cast,
Clamp, StopGradient.

These ops broadcast like NumPy, so an unbatched operand is left as it is and broadcasts
against the batched ones (RLX materializes it with Reshape + Expand instead). When every
batched operand has the output's rank and one batch axis, that axis is kept (no data
moves); otherwise batched operands get the batch at axis 0 and size-1 axes where their
rank falls short of the output's, so right-aligned broadcasting still lines up.
"""
from __future__ import annotations

from ._build import reshape
from ._batching import batch_rule


def _target_axis(ctx, rank: int) -> int:
    """The batch axis the result keeps: the common one when every batched operand is full
    rank and agrees on it, else 0."""
    axes = {ctx.bdims[i] for i in range(len(ctx.x)) if ctx.batched(i)}
    full = all(ctx.in_shapes[i].rank == rank for i in range(len(ctx.x)) if ctx.batched(i))
    return axes.pop() if full and len(axes) == 1 else 0


def _aligned(ctx, i: int, rank: int, d: int) -> int:
    """Operand ``i`` shaped to broadcast against the output with its batch axis at ``d``."""
    dims = ctx.in_shapes[i].dims
    short = rank - len(dims)
    if ctx.batched(i):
        x = ctx.moved(i, d)
        if short == 0:
            return x
        # d is 0 here (a short operand forces it): [B, 1.., dims]
        return reshape(ctx.g, x, (ctx.size,) + (1,) * short + tuple(dims))
    if len(dims) <= rank - d:       # its dims align right of the batch axis: no change
        return ctx.x[i]
    padded = [1] * short + list(ctx.static(ctx.x[i]))
    padded.insert(d, 1)
    return reshape(ctx.g, ctx.x[i], padded)


@batch_rule("Binary", "Compare", "Where", "Fma", "Activation", "Cast", "Clamp",
            "StopGradient")
def batch_elementwise(ctx):
    rank = ctx.out_shape.rank
    d = _target_axis(ctx, rank)
    ins = [_aligned(ctx, i, rank, d) for i in range(len(ctx.x))]
    return ctx.emit(ctx.node.kind, ins, d)
