"""RLX's ``LegalizeBroadcast``: an explicit Expand before every Binary operand whose
broadcast a modulo-indexed kernel (``out[i] = lhs[i % lhs_len] op rhs[i % rhs_len]``)
would get wrong.

An operand is left as it is when its dims equal the result's, when it holds one element,
or when it is a clean trailing slice of the result (``[N, C] + [C]``: every dim equals
the right-aligned result dim, no broadcasting 1s). Any other operand — the conv-bias
``[N, C, H, W] + [1, C, 1, 1]``, a column ``[N, 1]`` — is Expanded to the result's dims, so
every Binary after the pass reads equal shapes or one of those two safe forms. Only
Binary is rewritten, as in RLX. Values do not change. RLX counts a dim it cannot size
(dynamic) as 1 when testing for one element; here an operand with a dynamic dim is a
scalar only if it is statically one element, so it is Expanded instead.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.shape import Shape
from ._rewrite import PassLog, Rebuilder, graph_pass, with_bodies


def needs_expand(src: Shape, out: Shape) -> bool:
    """The operand is neither the result's dims, nor one element, nor a clean trailing
    slice of the result."""
    s, t = tuple(src.dims), tuple(out.dims)
    if s == t or src.numel == 1:
        return False
    return not (len(s) <= len(t) and s == t[len(t) - len(s):])


def _legalize(graph: Graph, log: PassLog | None) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda b: _legalize(b, log))
        changed |= op is not node.op
        if node.kind == "Binary" and len(node.inputs) == 2:
            ins = rb.inputs(node)
            for k, i in enumerate(node.inputs):
                if needs_expand(graph.shape(i), node.shape):
                    ins[k] = rb.new.op("Expand", (ins[k],), target_shape=tuple(node.shape.dims))
                    changed = True
                    if log is not None:
                        log.made(["Expand"], "Binary")
                        log.note("legalize_broadcast", f"@{graph.name} %{node.id} operand "
                                                       f"%{i} {graph.shape(i)} expanded to "
                                                       f"{node.shape.dims_text()}")
            rb.map(node.id, rb.new.add_node(op, ins, node.shape, node.name, node.origin))
            continue
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("legalize_broadcast")
def legalize_broadcast(graph: Graph, log: PassLog | None = None) -> Graph:
    """``graph`` with every non-trailing Binary broadcast made an explicit Expand."""
    return _legalize(graph, log)


__all__ = ["legalize_broadcast", "needs_expand"]
