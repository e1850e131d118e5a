"""RLX's static NaN-source lint (``lint_numerics``, ``RLX_LINT_NUMERICS``): values the
compiler can prove non-finite before anything runs.

Walks the graph in order keeping the value of every Constant and of every pure node
(CONST_FOLDABLE, not NONDETERMINISTIC, no body) whose operands all have one, evaluated on
the oracle; every such node whose value holds a NaN or an inf is a finding: a literal
(``constant literal is non-finite``) or a fold (``constant subgraph folds to a non-finite
value``: a division by a zero constant, the log of a negative constant...). A node that
reads an Input or a Param is never flagged: those are only maybe bugs. As in RLX, the
users of a non-finite constant that fold to non-finite values are findings too. Values
larger than ``max_elements`` are not evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..interpret import Interpreter
from ..ir.graph import Graph, Node, Op
from ..ops.leaves import ConstantAttrs, constant_bytes
from ..nan_check import FIX_HINTS, first_bad, op_short
from .fold_constants import DEFAULT_MAX_ELEMENTS, evaluate, foldable

LITERAL = "constant literal is non-finite"
FOLDED = "constant subgraph folds to a non-finite value"


@dataclass(frozen=True)
class NumericLint:
    """One provable NaN/inf (RLX's ``NumericLint``)."""

    node: int
    label: str
    kind: str               # "NaN", "+inf", "-inf"
    reason: str
    fix: str | None

    def __str__(self) -> str:
        text = f"%{self.node} {self.kind} \"{self.label}\": {self.reason}"
        return text + (f"\n  fix: {self.fix}" if self.fix else "")


def _constant_value(node):
    g = Graph("lint")
    g.set_outputs([g.add_node(node.op, [], node.shape)])
    return Interpreter(g, verify=False).run()[0]


def lint_numerics(graph: Graph, max_elements: int = DEFAULT_MAX_ELEMENTS) -> list:
    """Every provable compile-time NaN/inf of ``graph`` (top level), in node order."""
    known: dict = {}        # id -> the Constant-like node holding its value
    findings = []
    for node in graph.nodes:
        value, reason = None, None
        if node.kind == "Constant":
            value, reason = _constant_value(node), LITERAL
            known[node.id] = node
        else:
            operands = [known.get(i) for i in node.inputs]
            if None in operands or not foldable(node, operands, max_elements):
                continue
            try:
                value = evaluate(node, operands)
            except Exception:  # noqa: BLE001  (a fold that fails is left for run time)
                continue
            reason = FOLDED
            known[node.id] = Node(node.id, Op("Constant", ConstantAttrs(
                constant_bytes(np.asarray(value)))), (), node.shape)
        hit = first_bad(value)
        if hit is not None:
            short = op_short(node)
            findings.append(NumericLint(node.id, node.name or f"%{node.id}", hit[0], reason,
                                        FIX_HINTS.get(short)))
    return findings


__all__ = ["FOLDED", "LITERAL", "NumericLint", "lint_numerics"]
