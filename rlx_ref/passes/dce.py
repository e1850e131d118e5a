"""Dead-code elimination (RLX's ``DeadCodeElimination``): drop nodes no output reads.

Walks back from the outputs, marks every node they transitively read, and rebuilds the
graph with the marked nodes in their original order. Unlike RLX, Input and Param nodes are
always kept: they are the executable's interface (``run`` and ``set_param`` take them by
name) and a body's Inputs bind its operands by position. Bodies are cleaned recursively.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ._rewrite import PassLog, Rebuilder, graph_pass, with_bodies

_INTERFACE = ("Input", "Param")


def live_nodes(graph: Graph) -> set:
    """Ids of the nodes the outputs depend on, plus every Input and Param."""
    live: set = set()
    stack = list(graph.outputs)
    while stack:
        nid = stack.pop()
        if nid not in live:
            live.add(nid)
            stack.extend(graph.nodes[nid].inputs)
    return live | {n.id for n in graph.nodes if n.kind in _INTERFACE}


def _dce(graph: Graph, log: PassLog | None) -> Graph:
    live = live_nodes(graph)
    changed = len(live) != len(graph)
    rb = Rebuilder(graph)
    for node in graph.nodes:
        if node.id not in live:
            if log is not None:
                log.rewrote(node.kind, "dead: no output reads it")
                log.note("dead_code_elimination", f"@{graph.name} %{node.id} {node.kind} "
                                                  "is dead")
            continue
        op = with_bodies(node, lambda body: _dce(body, log))
        changed |= op is not node.op
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("dead_code_elimination")
def dead_code_elimination(graph: Graph, log: PassLog | None = None) -> Graph:
    """``graph`` without the nodes no output depends on (the same object if none)."""
    return _dce(graph, log)


__all__ = ["dead_code_elimination", "live_nodes"]
