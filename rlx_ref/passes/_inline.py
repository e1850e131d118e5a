"""Inlining a nested body into the graph being rebuilt (RLX's
``inline_subgraph_into_outputs``): the body's Inputs bind the captures by position."""
from __future__ import annotations

from ..ir.graph import Graph


def inline_body(g: Graph, body: Graph, captures) -> list:
    """Copy ``body``'s nodes into ``g`` with Input #i replaced by ``captures[i]``; return
    the ids of the body's outputs in ``g``."""
    ids: dict = {}
    k = 0
    for n in body.nodes:
        if n.kind == "Input":
            ids[n.id] = captures[k]
            k += 1
            continue
        ids[n.id] = g.add_node(n.op, [ids[i] for i in n.inputs], n.shape)
    if k != len(captures):
        raise ValueError(f"body @{body.name}: {k} Op::Input nodes but {len(captures)} "
                         "captures")
    return [ids[o] for o in body.outputs]
