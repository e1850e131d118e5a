"""Constant folding (RLX's ``ConstantFolding``): evaluate pure nodes of constants once.

A node folds when its kind has the CONST_FOLDABLE cap (and not NONDETERMINISTIC), every
operand is a Constant (possibly one folded a moment ago, so chains fold in one walk), and
its static result has at most ``max_elements`` elements (folding an Expand of a scalar
must not bake a large tensor into the graph). The value comes from the oracle, so a folded
graph computes exactly what the unfolded one does; a node whose evaluation fails (integer
division by zero, say) is left for run time, where the error names it. RLX folds only a
fixed f32 subset; here every dtype the oracle runs folds. Replaced operands become dead:
run ``dead_code_elimination`` afterwards.
"""
from __future__ import annotations

from ..interpret import Interpreter
from ..ir.graph import Graph, Op
from ..ops.leaves import ConstantAttrs, constant_bytes
from ..ops.opdef import Caps, get
from ._rewrite import PassLog, Rebuilder, graph_pass, has_bodies, with_bodies

DEFAULT_MAX_ELEMENTS = 1 << 16


def foldable(node, operands: list, max_elements: int) -> bool:
    """The node is pure, has operands, all Constant nodes, and a small static result."""
    caps = get(node.kind).caps
    if Caps.CONST_FOLDABLE not in caps or Caps.NONDETERMINISTIC in caps or has_bodies(node):
        return False
    n = node.shape.numel
    if not operands or n is None or n > max_elements:
        return False
    return all(o.kind == "Constant" for o in operands)


def evaluate(node, operands: list):
    """The value (an array) of ``node`` applied to the Constant nodes ``operands``, from
    the oracle."""
    mini = Graph("fold")
    ids = [mini.add_node(o.op, [], o.shape) for o in operands]
    mini.set_outputs([mini.add_node(node.op, ids, node.shape)])
    return Interpreter(mini, verify=False).run()[0]


def _fold(graph: Graph, max_elements: int, log: PassLog | None) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda body: _fold(body, max_elements, log))
        changed |= op is not node.op
        # Operands are read from the new graph: earlier folds are Constants there.
        operands = [rb.new.nodes[i] for i in rb.inputs(node)]
        if op is node.op and foldable(node, operands, max_elements):
            try:
                value = evaluate(node, operands)
            except Exception as e:  # noqa: BLE001  (any failure: leave it for run time)
                if log is not None:
                    log.note("constant_folding", f"@{graph.name} %{node.id} {node.kind} not "
                                                 f"folded: {e}")
            else:
                const = Op("Constant", ConstantAttrs(constant_bytes(value)))
                rb.map(node.id, rb.new.add_node(const, [], node.shape, node.name,
                                                node.origin))
                changed = True
                if log is not None:
                    log.rewrote(node.kind, "folded into Constants")
                    log.made(["Constant"], node.kind)
                    log.note("constant_folding", f"@{graph.name} %{node.id} {node.kind} "
                                                 f"folded to a Constant {node.shape}")
                continue
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("constant_folding")
def fold_constants(graph: Graph, max_elements: int = DEFAULT_MAX_ELEMENTS,
                   log: PassLog | None = None) -> Graph:
    """``graph`` with every foldable node replaced by a Constant (same object if none)."""
    return _fold(graph, max_elements, log)


__all__ = ["DEFAULT_MAX_ELEMENTS", "evaluate", "fold_constants", "foldable"]
