"""The batching rules table: one entry per op kind (the JAX pattern), and what rules share.

A rule is ``rule(ctx) -> (id, bdim)``: given a node some of whose operands carry the batch
axis (``ctx.bdims[i]`` is that axis in operand ``i``'s batched value, or None), it appends
nodes to ``ctx.g`` and returns the id of the node's batched value and where its batch axis
is. A rule may leave the batch axis wherever it is cheapest; the transform moves it to
axis 0 at the graph's outputs. Rules read the node's unbatched operand and output shapes
through ``ctx.in_shapes`` and ``ctx.out_shape``, and its payload through ``ctx.attrs``.

Adding a rule is one entry: ``@batch_rule("Kind")`` in one of the ``batch_*`` modules of
this package. A batched operand reaching a kind with no rule is a ``VmapError`` naming the
node and kind.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from ..ir.graph import Graph, Node
from ..ir.shape import Shape
from ._build import (AutodiffError, NodeRuleContext, load_rule_modules, reshape,
                     static_dims, transpose)

BATCH: dict[str, Callable] = {}
SAME = object()     # ``emit``'s default payload: the node's own


class VmapError(AutodiffError):
    """A graph ``vmap`` cannot batch, or a bad ``in_axes``; the message says which and why."""


def batch_rule(*kinds: str):
    """Register the decorated function as the batching rule of ``kinds``."""
    def deco(fn):
        for k in kinds:
            if k in BATCH:
                raise ValueError(f"two batching rules for {k}")
            BATCH[k] = fn
        return fn
    return deco


def shift(axis: int, bdim: int) -> int:
    """Where unbatched axis ``axis`` sits once a batch axis is inserted at ``bdim``."""
    return axis + 1 if axis >= bdim else axis


def with_batch(shape: Shape, bdim: int, size: int) -> Shape:
    """``shape`` with a batch axis of ``size`` inserted at ``bdim``."""
    dims = list(shape.dims)
    dims.insert(bdim, size)
    return Shape(dims, shape.dtype)


def move_axis(g: Graph, x: int, src: int, dst: int) -> int:
    """``x`` with its axis ``src`` moved to position ``dst`` (the others keep their order)."""
    if src == dst:
        return x
    perm = [i for i in range(g.shape(x).rank) if i != src]
    perm.insert(dst, src)
    return transpose(g, x, perm)


def broadcast_axis(g: Graph, x: int, at: int, size: int, what: str) -> int:
    """``x`` repeated ``size`` times along a new axis at ``at`` (Reshape, then Expand)."""
    dims = list(static_dims(g, x, what))
    dims.insert(at, 1)
    one = reshape(g, x, dims)
    dims[at] = size
    return g.op("Expand", (one,), target_shape=tuple(dims))


def merge_leading(g: Graph, x: int, what: str) -> int:
    """``[A, B, ...]`` viewed as ``[A·B, ...]``."""
    dims = static_dims(g, x, what)
    return reshape(g, x, (dims[0] * dims[1],) + tuple(dims[2:]))


def split_leading(g: Graph, x: int, size: int, what: str) -> int:
    """``[size·N, ...]`` viewed as ``[size, N, ...]``."""
    dims = static_dims(g, x, what)
    return reshape(g, x, (size, dims[0] // size) + tuple(dims[1:]))


@dataclass
class BatchContext(NodeRuleContext):
    """What a rule sees: the graph being built, the node, its operands and their batch axes."""

    g: Graph
    node: Node
    x: tuple            # operand ids in ``g``
    bdims: tuple        # per operand: its batch axis in ``g``, or None (not batched)
    size: int           # the batch size
    in_shapes: tuple    # the operands' unbatched shapes
    where: str          # "at %N (Kind)" for messages
    batch_body: Callable | None = None  # (body, in_bdims) -> Graph, for nested bodies
    error = VmapError                   # what ``fail`` builds (not a field)

    def batched(self, i: int) -> bool:
        return self.bdims[i] is not None

    def moved(self, i: int, to: int = 0) -> int:
        """Operand ``i`` with its batch axis at ``to``; an unbatched one is broadcast."""
        if self.bdims[i] is None:
            return broadcast_axis(self.g, self.x[i], to, self.size, self.where)
        return move_axis(self.g, self.x[i], self.bdims[i], to)

    def replace(self, **fields):
        """The node's payload with ``fields`` changed."""
        return dataclasses.replace(self.attrs, **fields)

    def emit(self, kind: str, inputs, bdim: int, payload=SAME) -> tuple:
        """Append ``kind`` (the node's payload unless another is given) whose value is the
        node's with the batch axis at ``bdim``; returns ``(id, bdim)``."""
        payload = self.attrs if payload is SAME else payload
        shape = with_batch(self.out_shape, bdim, self.size)
        return self.g.op(kind, tuple(inputs), payload, shape=shape), bdim

    def static(self, x: int) -> tuple:
        return static_dims(self.g, x, self.where)


def rule_for(kind: str, where: str) -> Callable:
    """The batching rule of ``kind``; VmapError naming the node when there is none."""
    _load_rules()
    try:
        return BATCH[kind]
    except KeyError:
        raise VmapError(f"{where}: no batching rule for {kind}; add one with "
                        f"@batch_rule({kind!r}) in rlx_ref/autodiff/batch_*.py") from None


def _load_rules() -> None:
    load_rule_modules("batch_")


def batch_kinds() -> list[str]:
    """Every kind with a batching rule."""
    _load_rules()
    return sorted(BATCH)
