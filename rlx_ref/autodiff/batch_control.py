"""Batching rules of the control kinds: If, While, Scan, CustomFn.

Their bodies are batched as graphs of their own (``ctx.batch_body``: the body's Inputs get
the batch where the node's operands carry it, its outputs get it at 0). An If whose
predicate is shared stays an If; one with a per-example predicate computes both branches
and selects per example (``Where``). A While runs while any example's predicate holds and
each example keeps its state once its own predicate fails, so every example takes exactly
its own number of steps (a ``max_iterations`` cap stays per example too). Scan keeps its
steps: xs rows stay the leading axis and the batch goes inside each row. CustomFn batches
``fwd_body`` and its rule bodies (as RLX), so a batched graph keeps the custom gradient.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.graph import Graph
from ._build import cast, reshape, scalar
from ._batching import batch_rule
from .prepare import inline


def _truth(g: Graph, pred: int, rank: int) -> int:
    """A per-example predicate ``[B, (one element)]`` as bool ``[B, 1, ...]`` of ``rank``
    axes after the batch (non-zero, NaN too, is true)."""
    size = g.shape(pred).dims[0]
    p = reshape(g, pred, (size,) + (1,) * rank)
    if g.shape(p).dtype.is_bool:
        return p
    return g.op("Compare", (p, scalar(g, 0, g.shape(p).dtype)), op="Ne")


@batch_rule("If")
def batch_if(ctx):
    caps, cap_bdims = ctx.x[1:], ctx.bdims[1:]
    a = ctx.attrs
    then_b = ctx.batch_body(a.then_branch, cap_bdims)
    else_b = ctx.batch_body(a.else_branch, cap_bdims)
    if not ctx.batched(0):
        return ctx.emit("If", ctx.x, 0, ctx.replace(then_branch=then_b, else_branch=else_b))
    g = ctx.g
    yes, no = inline(g, then_b, caps)[0], inline(g, else_b, caps)[0]
    pick = _truth(g, ctx.moved(0, 0), ctx.out_shape.rank)
    return ctx.emit("Where", (pick, yes, no), 0, None)


def _any(g: Graph, per_example: int) -> int:
    """One f32 element: 1 when some example's predicate holds."""
    flags = cast(g, per_example, DType.F32)
    return g.op("Reduce", (flags,), op="Max", axes=tuple(range(g.shape(flags).rank)),
                keep_dim=False)


def _loop_graph(name: str, shapes, fn) -> Graph:
    """A body Graph with one Input per carried value; ``fn(g, ids)`` gives its outputs."""
    g = Graph(name)
    ids = [g.input(f"carried_{i}", s.dims, s.dtype) for i, s in enumerate(shapes)]
    g.set_outputs(fn(g, ids))
    return g


@batch_rule("While")
def batch_while(ctx):
    a = ctx.attrs
    state = [ctx.moved(i, 0) for i in range(len(ctx.x))]
    shapes = [ctx.g.shape(s) for s in state]
    cond_b = ctx.batch_body(a.cond, [0] * len(state))
    body_b = ctx.batch_body(a.body, [0] * len(state))

    def cond(g, ids):
        return [_any(g, _truth(g, inline(g, cond_b, ids)[0], 0))]

    def body(g, ids):
        nxt = inline(g, body_b, ids)
        go = inline(g, cond_b, ids)[0]
        return [g.op("Where", (_truth(g, go, s.rank - 1), n, s_id))
                for n, s_id, s in zip(nxt, ids, shapes)]

    payload = ctx.replace(cond=_loop_graph(a.cond.name, shapes, cond),
                          body=_loop_graph(a.body.name, shapes, body))
    return ctx.emit("While", state, 0, payload)


@batch_rule("Scan")
def batch_scan(ctx):
    """The carry is batched at 0; broadcasts keep their batch axes; a batched xs keeps
    ``length`` leading, so each row it gives a step is batched (at 0 when the batch was)."""
    a = ctx.attrs
    nb = a.num_bcast
    carry = ctx.moved(0, 0)
    bcasts, xs = list(ctx.x[1:1 + nb]), []
    step_bdims = list(ctx.bdims[1:1 + nb])
    for i in range(1 + nb, len(ctx.x)):
        d = ctx.bdims[i]
        xs.append(ctx.moved(i, 1) if d == 0 else ctx.x[i])
        step_bdims.append(None if d is None else max(d, 1) - 1)
    body = ctx.batch_body(a.body, [0] + step_bdims)
    return ctx.emit("Scan", [carry] + bcasts + xs, 1 if a.save_trajectory else 0,
                    ctx.replace(body=body))


@batch_rule("CustomFn")
def batch_custom_fn(ctx):
    """Every operand batched at 0; the bodies batched with every Input at 0."""
    a = ctx.attrs
    ins = [ctx.moved(i, 0) for i in range(len(ctx.x))]

    def batched(body):
        return None if body is None else ctx.batch_body(body, [0] * len(body.input_nodes()))

    payload = ctx.replace(fwd_body=batched(a.fwd_body), vjp_body=batched(a.vjp_body),
                          jvp_body=batched(a.jvp_body))
    return ctx.emit("CustomFn", ins, 0, payload)

