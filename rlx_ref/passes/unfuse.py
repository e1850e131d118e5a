"""RLX's ``UnfuseElementwiseRegions``: ElementwiseRegion → its steps as separate ops.

For backends that do not claim ElementwiseRegion (for the dtypes its steps compute in),
and for every region when ``force`` is set (RLX's ``unfuse_elementwise_regions``, which its
CPU target sets). The steps become Activation / Cast / Binary / Compare / Where nodes
(a ResizeNearest2x first for a prologue) through ``rlx_ref.ops.region.unfuse``, so they
compute exactly what the region computes; the last one takes the region's label.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ops.region import unfuse as unfuse_region
from ..ops.region import walk_chain
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies


def claimed(node, graph: Graph, table: SupportTable) -> bool:
    """The backend runs this region: it claims ElementwiseRegion for every step's dtype."""
    dtypes = walk_chain(node.attrs.chain, [graph.shape(i).dtype for i in node.inputs])
    return all(table.supports("ElementwiseRegion", dt) for dt in {*dtypes, node.shape.dtype})


def _unfuse(graph: Graph, table: SupportTable, force: bool, log) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        if node.kind == "ElementwiseRegion" and (force or not claimed(node, graph, table)):
            start = len(rb.new.nodes)
            last = unfuse_region(rb.new, node.attrs, rb.inputs(node))
            rb.new.nodes[last].name = node.name
            rb.map(node.id, last)
            changed = True
            if log is not None:
                made = sorted({n.kind for n in rb.new.nodes[start:]})
                log.rewrote("ElementwiseRegion", "unfused into " + ", ".join(made))
                log.made(made, "ElementwiseRegion")
                log.note("unfuse_elementwise_regions",
                         f"@{graph.name} %{node.id} -> {len(rb.new.nodes) - start} ops")
            continue
        op = with_bodies(node, lambda body: _unfuse(body, table, force, log))
        changed |= op is not node.op
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("unfuse_elementwise_regions")
def unfuse_elementwise(graph: Graph, supported: SupportTable | None = None,
                       force: bool = False, log: PassLog | None = None) -> Graph:
    """``graph`` with every region the backend does not claim (all with ``force``, or when
    ``supported`` is None) broken into its steps."""
    table = supported if supported is not None else SupportTable({})
    return _unfuse(graph, table, force or supported is None, log)


__all__ = ["claimed", "unfuse_elementwise"]
