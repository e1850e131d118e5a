"""The Scan steps of the autodiff pre-pass (RLX's ``convert_scans_for_ad``).

1. broadcast operands become per-step xs: each is Expanded to ``[length, *bcast]``
   (RLX's ``materialize_bcasts_for_ad``), so the rule sees only carry + xs scans and a
   broadcast's gradient is the sum of its rows' (Expand's rule);
2. a Scan without trajectory becomes a trajectory Scan, then Narrow(last row) and
   Reshape, so the backward has every step's carry; with ``length = 0`` the value is init
   itself.

A checkpointed Scan (``0 < num_checkpoints < length``, trajectory required) keeps its K
rows: its backward recomputes the others with the forward body. Only the graph's own
level is rewritten: a Scan inside a body is prepared when that body is differentiated.
"""
from __future__ import annotations

import dataclasses

from ..ir.graph import Graph, Op
from ..passes._rewrite import Rebuilder
from ._build import AutodiffError, expand, reshape


def _needs(node) -> bool:
    return node.kind == "Scan" and (node.attrs.num_bcast > 0 or not node.attrs.save_trajectory)


def _as_rows(g: Graph, b: int, length: int, where: str) -> int:
    """``b`` broadcast to ``[length, *b]``."""
    s = g.shape(b)
    if not s.is_static:
        raise AutodiffError(f"{where}: broadcast operand {s} needs static dims to become "
                            "per-step rows")
    dims = s.static_dims()
    return expand(g, reshape(g, b, (1,) + dims), (length,) + dims)


def _convert(g: Graph, node, ins: list) -> int:
    a = node.attrs
    where = f"at %{node.id} (Scan)"
    init, nb = ins[0], a.num_bcast
    if not a.save_trajectory and a.length == 0:
        return init
    rows = [_as_rows(g, b, a.length, where) for b in ins[1:1 + nb]]
    attrs = dataclasses.replace(a, save_trajectory=True, num_bcast=0, num_xs=nb + a.num_xs)
    carry = g.shape(init)
    n_rows = a.num_checkpoints if 0 < a.num_checkpoints < a.length else a.length
    traj = g.add_node(Op("Scan", attrs), [init] + rows + ins[1 + nb:],
                      carry.with_dims((n_rows,) + tuple(carry.dims)))
    if a.save_trajectory:
        return traj
    last = g.op("Narrow", (traj,), axis=0, start=a.length - 1, len=1)
    return g.op("Reshape", (last,), new_shape=tuple(carry.dims))


def scans_for_ad(graph: Graph) -> Graph:
    """``graph`` with every Scan of its own level in trajectory, carry + xs form."""
    if not any(_needs(n) for n in graph.nodes):
        return graph
    rb = Rebuilder(graph)
    for node in graph.nodes:
        if not _needs(node):
            rb.copy(node)
            continue
        start = len(rb.new.nodes)
        out = _convert(rb.new, node, rb.inputs(node))
        if node.name is not None and out >= start:     # a wrt label must survive
            rb.new.nodes[out].name = node.name
        rb.map(node.id, out)
    return rb.finish()
