"""RLX's ``LowerFma`` pass: every Fma node becomes ``Add(Mul(a, b), c)`` in its own dtype.

This is the f64 branch of the Fma decomposition (``decompose.lower_fma``) applied to every
dtype, as RLX's pass does: two roundings, so a 32-bit or 16-bit Fma loses the single
rounding the op promises. The compile pipeline does not run this pass; its ``decompose``
keeps the widened form (multiply and add in f64, one rounding back), which is exact but
for rare double-rounding ties. Run ``lower_fma`` by name to get RLX's graph.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ._rewrite import PassLog, Rebuilder, graph_pass, with_bodies
from ._fuse import make_op


def _lower(graph: Graph, log: PassLog | None) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda body: _lower(body, log))
        if node.kind != "Fma":
            changed |= op is not node.op
            rb.copy(node, op)
            continue
        a, b, c = rb.inputs(node)
        prod = rb.new.add_node(make_op("Binary", op="Mul"), [a, b], node.shape, None,
                               node.origin)
        rb.map(node.id, rb.new.add_node(make_op("Binary", op="Add"), [prod, c], node.shape,
                                        node.name, node.origin))
        changed = True
        if log is not None:
            log.rewrote("Fma", "lowered into Binary Mul, Add")
            log.made(["Binary"], "Fma")
            log.note("lower_fma", f"@{graph.name} %{node.id} Fma -> Mul, Add")
    return rb.finish() if changed else graph


@graph_pass("lower_fma")
def lower_fma(graph: Graph, supported=None, log: PassLog | None = None) -> Graph:
    """Every Fma (bodies included) as ``Add(Mul(a, b), c)``; ``supported`` is ignored: RLX
    registers the pass only for backends without a native Fma."""
    return _lower(graph, log)


__all__ = ["lower_fma"]
