"""``vmap(graph, in_axes, batch_size)``: a graph lifted to a batch of its inputs, as RLX.

RLX's ``vmap(forward, batched_input_names, batch_size)`` batches the named Inputs on a
leading axis, shares everything else, and gives every output that a batched value reaches
a leading batch axis. Here ``in_axes`` also takes JAX's spellings: a dict ``{name: axis
or None}``, one axis per Input (node order), or one axis for every Input; a Param named in
it is batched too (RLX's Params are always shared).

The walk visits nodes in order. A node none of whose operands carries the batch axis is
copied unchanged (RLX: shared), so ops off the batched path need no rule; every other
node goes through its kind's batching rule (``_batching.py``; rules in ``batch_*.py``),
which may leave the batch axis anywhere. Outputs a batched value reaches get the batch
axis moved to 0; an output none reaches keeps its shape, as RLX's code does (its doc
comment says every output gains the axis; pyrlx's says every reachable one). Control flow
batches through rules too (If, While, Scan, CustomFn batch their bodies), so a While
without a cap stays a loop. The pre-pass unfuses ElementwiseRegions and decomposes every
kind that has a decomposition but no batching rule.
"""
from __future__ import annotations

from ..ir.builder import BuildError
from ..ir.graph import Graph
from ..ir.verify import verify_or_raise
from ..passes.decompose import DECOMPOSITIONS, decompose
from ..passes.unfuse import unfuse_elementwise
from ._batching import (BATCH, BatchContext, VmapError, _load_rules, broadcast_axis,
                        move_axis, rule_for, with_batch)

def prepare_for_vmap(graph: Graph) -> Graph:
    """``graph`` with regions unfused and every rule-less decomposable kind decomposed."""
    _load_rules()
    verify_or_raise(graph)
    g = unfuse_elementwise(graph, None, force=True)
    g = decompose(g, None, kinds={k for k in DECOMPOSITIONS if k not in BATCH})
    verify_or_raise(g)
    return g


def _walk(src: Graph, dst: Graph, leaf, size: int, path: str) -> dict:
    """Batch ``src`` into ``dst``; ``leaf(node) -> (id, bdim)`` places Inputs and Params.
    Returns each node's ``(id, bdim)`` in ``dst``."""
    env: dict = {}
    for n in src.nodes:
        if n.kind in ("Input", "Param"):
            env[n.id] = leaf(n)
            continue
        ins = [env[i] for i in n.inputs]
        ids = tuple(i for i, _ in ins)
        bdims = tuple(b for _, b in ins)
        if n.kind == "Constant" or all(b is None for b in bdims):
            env[n.id] = (dst.add_node(n.op, ids, n.shape, n.name), None)
            continue
        where = f"at %{n.id} ({n.kind}){path}"
        ctx = BatchContext(dst, n, ids, bdims, size, tuple(src.shape(i) for i in n.inputs),
                           where, lambda body, axes: batch_body(body, axes, size))
        start = len(dst.nodes)
        try:
            out, bdim = rule_for(n.kind, where)(ctx)
        except BuildError as e:     # a payload or shape the batched op cannot take
            raise VmapError(f"{where}: its batched form is not a valid node: {e}") from e
        want = None if bdim is None else with_batch(n.shape, bdim, size)
        if want is None or dst.shape(out) != want:
            raise VmapError(f"{where}: its batching rule gave {dst.shape(out)} with the batch "
                            f"on axis {bdim}; expected {n.shape} batched there ({want})")
        if n.name and out >= start:
            dst.nodes[out].name = n.name
        env[n.id] = (out, bdim)
    return env


def _finish(dst: Graph, env: dict, outputs, size: int, force: bool) -> list:
    """Output ids with the batch axis at 0; unbatched outputs broadcast only with ``force``."""
    outs = []
    for o in outputs:
        i, b = env[o]
        if b is None:
            outs.append(broadcast_axis(dst, i, 0, size, f"output %{o}") if force else i)
        else:
            outs.append(move_axis(dst, i, b, 0))
    return outs


def batch_body(body: Graph, in_bdims, size: int) -> Graph:
    """A nested body batched: its Inputs (node order) carry the batch at ``in_bdims`` (an
    axis or None each) and every output gets it at axis 0."""
    inputs = iter(in_bdims)

    def leaf(n):
        b = next(inputs) if n.kind == "Input" else None
        shape = n.shape if b is None else with_batch(n.shape, b, size)
        return dst.add_node(n.op, (), shape, n.name), b

    dst = Graph(body.name)
    env = _walk(body, dst, leaf, size, f" in @{body.name}")
    dst.set_outputs(_finish(dst, env, body.outputs, size, force=True))
    return dst


def _leaf_axes(graph: Graph, in_axes) -> dict:
    """``in_axes`` resolved to ``{leaf position: axis}``; VmapError on a bad spelling.
    Positions count Inputs and Params in node order, so they survive the pre-pass."""
    leaves = [n for n in graph.nodes if n.kind in ("Input", "Param")]
    inputs = [k for k, n in enumerate(leaves) if n.kind == "Input"]
    by_name = {n.attrs.name: k for k, n in enumerate(leaves)}
    if isinstance(in_axes, bool) or in_axes is None:
        raise VmapError(f"in_axes must name the batched Inputs, got {in_axes!r}")
    if isinstance(in_axes, int):
        raw = {k: in_axes for k in inputs}
    elif isinstance(in_axes, str):
        raw = _named(graph, by_name, {in_axes: 0})
    elif isinstance(in_axes, dict):
        raw = _named(graph, by_name, in_axes)
    else:
        seq = list(in_axes)
        if all(isinstance(a, str) for a in seq):          # RLX: names batched on axis 0
            raw = _named(graph, by_name, {a: 0 for a in seq})
        elif any(isinstance(a, str) for a in seq):
            raise VmapError(f"in_axes mixes names and axes: {seq!r}; give names (RLX), a "
                            "{name: axis} dict, or one axis per Input")
        elif len(seq) != len(inputs):
            raise VmapError(f"in_axes gives {len(seq)} axes but @{graph.name} has "
                            f"{len(inputs)} Inputs (one axis or None each, in node order)")
        else:
            raw = dict(zip(inputs, seq))
    out = {}
    for k, axis in raw.items():
        if axis is None:
            continue
        n = leaves[k]
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise VmapError(f"in_axes for {n.attrs.name!r} must be an int or None, got "
                            f"{axis!r}")
        rank = n.shape.rank
        if not -(rank + 1) <= axis <= rank:
            raise VmapError(f"in_axes puts the batch of {n.attrs.name!r} on axis {axis}, out "
                            f"of range for its rank {rank} (expected {-(rank + 1)}..{rank})")
        out[k] = axis % (rank + 1)
    return out


def _named(graph: Graph, by_name: dict, axes: dict) -> dict:
    for name in axes:
        if name not in by_name:
            raise VmapError(f"in_axes names {name!r}, which is no Input or Param of "
                            f"@{graph.name}; it has {sorted(by_name) or 'none'}")
    return {by_name[name]: axis for name, axis in axes.items()}


def vmap(graph: Graph, in_axes, batch_size: int) -> Graph:
    """The graph computing ``graph`` for each of ``batch_size`` examples at once.

    ``in_axes`` says which Inputs (or Params) carry the batch and on which axis: a list of
    names batched on axis 0 (RLX's ``batched_input_names``), a dict ``{name: axis or
    None}``, a list with one axis or None per Input in node order, or one int for every
    Input. Others are shared by every example. The result, named ``<name>_vmap``, has the
    same Inputs and Params (batched ones widened by ``batch_size`` at their axis) and the
    same outputs, each batched one with the batch on axis 0; an output that no batched
    value reaches keeps its shape (RLX). VmapError names the node and kind when a batched
    value reaches a kind without a batching rule.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise VmapError(f"batch_size must be a positive int, got {batch_size!r}")
    axes = _leaf_axes(graph, in_axes)
    prepared = prepare_for_vmap(graph)
    position = {n.id: k for k, n in
                enumerate(n for n in prepared.nodes if n.kind in ("Input", "Param"))}
    out = Graph(f"{graph.name}_vmap")

    def leaf(n):
        b = axes.get(position[n.id])
        shape = n.shape if b is None else with_batch(n.shape, b, batch_size)
        return out.add_node(n.op, (), shape, n.name), b

    env = _walk(prepared, out, leaf, batch_size, "")
    out.set_outputs(_finish(out, env, prepared.outputs, batch_size, force=False))
    verify_or_raise(out)
    return out


__all__ = ["batch_body", "prepare_for_vmap", "vmap"]
