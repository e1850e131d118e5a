"""Common-subexpression elimination (RLX's ``CommonSubexpressionElimination``).

Walks the graph in order and value-numbers every interior node by (op with its payload,
remapped operands, declared shape); a node equal to an earlier one is replaced by it, so
every user reads the first occurrence. As in RLX, leaves (Input, Param, Constant: no
operands) are never merged: two Inputs of one shape are different values. Unlike RLX,
nodes whose kind has the NONDETERMINISTIC cap (RngNormal, RngUniform, Sample) are never
merged either: two draws with equal payloads are two draws. The payload is compared through
its RLX text form (RLX keys by its ``Debug`` form), so every field, nested bodies included,
takes part and NaN payload values compare equal to themselves. The dropped duplicate's
label is lost; the survivor keeps its own. Bodies are processed recursively.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.text import print_op
from ..ops.opdef import Caps, get
from ._rewrite import PassLog, Rebuilder, graph_pass, with_bodies


def mergeable(node) -> bool:
    """An interior node whose value depends only on its op, operands and shape."""
    return bool(node.inputs) and Caps.NONDETERMINISTIC not in get(node.kind).caps


def _cse(graph: Graph, log: PassLog | None) -> Graph:
    rb = Rebuilder(graph)
    seen: dict = {}
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda body: _cse(body, log))
        changed |= op is not node.op
        if mergeable(node):
            key = (print_op(op), tuple(rb.inputs(node)), node.shape)
            first = seen.get(key)
            if first is not None:
                rb.map(node.id, first)
                changed = True
                if log is not None:
                    log.rewrote(node.kind, "merged with an identical node (CSE)")
                    log.note("common_subexpression_elimination",
                             f"@{graph.name} %{node.id} {node.kind} merged into new %{first}")
                continue
            seen[key] = rb.copy(node, op)
            continue
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("common_subexpression_elimination")
def common_subexpression_elimination(graph: Graph, log: PassLog | None = None) -> Graph:
    """``graph`` with structurally identical interior nodes merged (same object if none)."""
    return _cse(graph, log)


cse = common_subexpression_elimination

__all__ = ["common_subexpression_elimination", "cse", "mergeable"]
