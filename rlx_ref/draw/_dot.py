"""A Graph as a Graphviz Digraph: one node per IR node, shapes on edges, every fused node
as a cluster holding its decomposition, every nested body as a sub-cluster."""
from __future__ import annotations

import dataclasses

from ..ir.graph import Graph
from ..ops.opdef import Caps, get
from . import _labels as L

TOOLTIP_MAX = 400


def is_fused(node) -> bool:
    """A fused region: an ElementwiseRegion or any kind with the FUSED cap."""
    if node.kind == "ElementwiseRegion":
        return True
    try:
        return Caps.FUSED in get(node.kind).caps
    except KeyError:
        return False


def fused_body(graph: Graph, node) -> Graph | None:
    """The fused node's steps as a graph over one Input per operand (its region chain or
    its registered decomposition); None where none can be built (e.g. dynamic dims)."""
    from ..ops.region import unfuse
    from ..passes import unfuse_composites  # noqa: F401  (registers the fused forms)
    from ..passes.decompose import DECOMPOSITIONS

    g = Graph(node.kind)
    try:
        ins = [g.input(f"in{i}", graph.shape(x).dims, graph.shape(x).dtype)
               for i, x in enumerate(node.inputs)]
        if node.kind == "ElementwiseRegion":
            last = unfuse(g, node.attrs, ins)
        else:
            d = DECOMPOSITIONS.get(node.kind)
            last = d.fn(g, node, ins) if d is not None else None
    except Exception:  # noqa: BLE001  (a step that cannot be built: draw the node whole)
        return None
    if last is None or last in ins:
        return None
    g.set_outputs([last])
    return g


def bodies(node) -> list:
    """``(field name, Graph)`` for each nested body in the node's payload."""
    a = node.attrs
    if a is None or not dataclasses.is_dataclass(a):
        return []
    return [(f.name, getattr(a, f.name)) for f in dataclasses.fields(a)
            if isinstance(getattr(a, f.name), Graph)]


def _dot_text(s: str) -> str:
    """Label text for DOT: backslashes kept literal, newlines as centred line breaks."""
    return s.replace("\\", "\\\\").replace("\n", "\\n")


class Drawer:
    """Fills a Digraph; counts the clusters it makes (fused regions and bodies)."""

    def __init__(self, dot, expand_fused: bool = True):
        self.dot = dot
        self.expand_fused = expand_fused
        self.fused_clusters = 0
        self.body_clusters = 0

    def draw(self, container, g: Graph, scope: str, feeds=None, outputs=None) -> dict:
        """Draw ``g``'s nodes into ``container``; returns node id -> DOT name of the
        node holding its value. ``feeds`` maps Input i of a fused body to outer values."""
        outputs = set(g.outputs) if outputs is None else outputs
        names: dict = {}
        n_in = 0
        for n in g.nodes:
            if feeds is not None and n.kind == "Input":
                names[n.id] = feeds[n_in]
                n_in += 1
                continue
            if self.expand_fused and is_fused(n):
                inner = fused_body(g, n)
                if inner is not None:
                    names[n.id] = self._fused(container, g, n, inner, scope, names,
                                              n.id in outputs)
                    continue
            names[n.id] = self._node(container, g, n, scope, names, n.id in outputs,
                                     numbered=feeds is None)
        return names

    def _node(self, container, g: Graph, n, scope: str, names: dict, is_out: bool,
              numbered: bool = True) -> str:
        me = f"{scope}n{n.id}"
        tip = str(n) if numbered else str(n.op)
        if bodies(n):               # the bodies' JSON would swamp the tooltip: name them
            tip = (f"%{n.id} = {n.kind}({', '.join(f'%{i}' for i in n.inputs)}) : {n.shape}"
                   f"; bodies: {', '.join(f for f, _ in bodies(n))}")
        container.node(me, _dot_text(L.node_label(n, numbered)), tooltip=_dot_text(
            tip if len(tip) <= TOOLTIP_MAX else tip[:TOOLTIP_MAX - 1] + "…"),
            **L.node_style(n, is_out))
        for i in n.inputs:     # edges at top level: one inside a cluster pulls its ends in
            self.dot.edge(names[i], me, label=_dot_text(L.edge_label(g, i)))
        for field, body in bodies(n):
            self._body(container, n, field, body, f"{scope}b{n.id}{field}_", me)
        return me

    def _fused(self, container, g, n, inner: Graph, scope, names, is_out: bool) -> str:
        self.fused_clusters += 1
        sub = f"{scope}f{n.id}_"
        with container.subgraph(name=f"cluster_{sub}") as c:
            head = f"%{n.id} {n.kind}" + (f' "{n.name}"' if n.name else "")
            c.attr(label=_dot_text(head), tooltip=_dot_text(str(n)[:TOOLTIP_MAX]),
                   **L.FUSED_CLUSTER)
            inner_names = self.draw(c, inner, sub, feeds=[names[i] for i in n.inputs],
                                    outputs={inner.outputs[0]} if is_out else set())
        return inner_names[inner.outputs[0]]

    def _body(self, container, n, field: str, body: Graph, scope: str, owner: str) -> None:
        self.body_clusters += 1
        cluster = f"cluster_{scope}"
        with container.subgraph(name=cluster) as c:
            c.attr(label=_dot_text(f"%{n.id} {n.kind}.{field}: @{body.name}"),
                   **L.BODY_CLUSTER)
            inner = self.draw(c, body, scope)
        if body.nodes:
            self.dot.edge(owner, inner[body.nodes[0].id], lhead=cluster, style="dotted",
                           arrowhead="odot", color="#7048e8", label=field)


def build(graph: Graph, expand_fused: bool = True, rankdir: str = "TB"):
    """``(Digraph, Drawer)`` for ``graph`` (the Drawer holds the cluster counts)."""
    from . import require_graphviz

    graphviz = require_graphviz()
    dot = graphviz.Digraph(name=graph.name, comment=f"rlx_ref graph @{graph.name}")
    dot.attr(rankdir=rankdir, compound="true", fontname="Helvetica", fontsize="11",
             label=_dot_text(f"@{graph.name}"), labelloc="t")
    dot.attr("node", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="8", color="#495057")
    drawer = Drawer(dot, expand_fused)
    drawer.draw(dot, graph, "")
    return dot, drawer


__all__ = ["Drawer", "bodies", "build", "fused_body", "is_fused"]
