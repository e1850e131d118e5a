"""Judging one node's backend value against the oracle, as conformance judges a case.

On its own (``judge_node``): the oracle runs the node's op alone on the inputs the backend
fed it, in float64 and the case dtype, and the op's accuracy contract decides. End to end
(``chain_judge``): against the oracle's run of the whole graph, under the composite
contract of the prefix graph that ends at the node.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph
from ..ir.shape import Shape

LEAVES = ("Input", "Param")


@dataclass
class NodeDiff:
    """One node's verdict: ``status`` is conformance's (ok, MISSING, MISMATCH, error)."""

    node_id: int
    kind: str
    text: str
    status: str
    message: str = ""
    contract: str = ""
    max_abs: float | None = None
    budget_ratio: float | None = None
    how: str = "node"          # node: the op on the backend's inputs; chain: end to end

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def one_op_case(node, operands: list, got_shape):
    """The conformance Case of ``node``'s op alone on ``operands`` (its inputs x0, x1...)."""
    from ..conformance.cases import make_case
    from ..ops.single import single_op_graph

    out = Shape(tuple(got_shape), node.shape.dtype)
    g = single_op_graph(node.kind, node.attrs, operands, out)
    return make_case(node.kind, node.shape.dtype.display, g,
                     {f"x{i}": np.asarray(v) for i, v in enumerate(operands)}, tags=("diff",),
                     source=f"diff at %{node.id}")


def judge_node(node, operands: list, got, oracle_shape, promises=()) -> tuple:
    """(NodeDiff, Case): the backend's value ``got`` against the oracle running the op
    alone on ``operands``, under the op's accuracy contract."""
    from ..conformance.accuracy import case_accuracy
    from ..conformance.compare import compare
    from ..conformance.runner import OracleError, oracle_outputs

    case = one_op_case(node, operands, oracle_shape)
    try:
        o64, oc = oracle_outputs(case)
    except OracleError as e:
        return NodeDiff(node.id, node.kind, str(node), "error",
                        f"the oracle fails on the inputs the backend fed this node: {e}"), case
    acc = case_accuracy(case, None, promises)
    declared = case.graph.nodes[case.graph.outputs[0]].shape
    v = compare(got, o64[0], oc[0], declared, acc)
    return NodeDiff(node.id, node.kind, str(node), v.status, v.message, acc.describe(),
                    v.max_abs, v.budget_ratio), case


def chain_judge(graph, nid, got, o64, oc) -> NodeDiff:
    """Node ``nid``'s backend value against the oracle run end to end (float64 and case
    dtype), under the composite contract of the prefix graph ending at it."""
    from ..conformance.accuracy import graph_accuracy
    from ..conformance.compare import compare

    node = graph.nodes[nid]
    prefix = prefix_graph(graph, nid)
    acc = graph_accuracy(prefix, node.shape.dtype)
    declared = Shape(np.shape(o64[nid]), node.shape.dtype)
    v = compare(got, o64[nid], oc[nid], declared, acc)
    return NodeDiff(nid, node.kind, str(node), v.status, v.message, acc.describe(),
                    v.max_abs, v.budget_ratio, how="chain")


def prefix_graph(graph: Graph, nid: int) -> Graph:
    g = Graph(f"{graph.name}_to_{nid}")
    g.nodes = graph.copy().nodes[:nid + 1]
    g.outputs = [nid]
    return g


def only_needed(graph: Graph, table: dict, kind: str) -> dict:
    names = {n.attrs.name for n in graph.nodes if n.kind == kind}
    return {k: v for k, v in table.items() if k in names}


def prefix_case(graph: Graph, nid: int, inputs: dict, params: dict):
    """A ``multi:`` conformance case: the prefix graph ending at ``nid`` on the inputs."""
    from ..conformance.cases import make_case

    g = prefix_graph(graph, nid)
    return make_case(f"multi:{g.name}", g.nodes[nid].shape.dtype.display, g,
                     only_needed(g, inputs, "Input"), tags=("diff",),
                     params=only_needed(g, params, "Param"), source=f"diff at %{nid}")
