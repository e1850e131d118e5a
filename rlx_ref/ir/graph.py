"""The RLX graph: an append-only SSA list of nodes; a node's id is its index."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from .shape import Shape


@dataclass(frozen=True)
class Op:
    """An op instance: an RLX kind name plus its payload (an attrs object or None)."""

    kind: str
    attrs: Any = None

    def __post_init__(self):
        from ..ops.codec import normalize_attrs

        object.__setattr__(self, "attrs", normalize_attrs(self.attrs))

    @property
    def opdef(self):
        from ..ops.opdef import get

        return get(self.kind)

    def __str__(self) -> str:
        from .text import print_op

        return print_op(self)


@dataclass
class Node:
    """One node: its op, operand ids, declared output shape, optional label."""

    id: int
    op: Op
    inputs: tuple
    shape: Shape
    name: str | None = None
    origin: Any = None

    @property
    def kind(self) -> str:
        return self.op.kind

    @property
    def attrs(self):
        return self.op.attrs

    def __str__(self) -> str:
        from .text import print_node

        return print_node(self)


class GraphError(ValueError):
    """A structural misuse of the graph API (bad id, out-of-order operand)."""


class Graph:
    """Append-only SSA graph: inputs precede users; one output tensor per node.

    Nodes are added with ``add_node`` (or the builder methods); ``outputs`` lists the
    node ids that are the graph's results. Bodies of control-flow ops are Graphs too.
    """

    def __init__(self, name: str = "main"):
        self.name = name
        self.nodes: list[Node] = []
        self.outputs: list[int] = []

    # ── core structure ────────────────────────────────────────────────────
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def node(self, nid: int) -> Node:
        if not 0 <= nid < len(self.nodes):
            raise GraphError(f"%{nid} does not exist (graph @{self.name} has {len(self)} nodes)")
        return self.nodes[nid]

    def shape(self, nid: int) -> Shape:
        return self.node(nid).shape

    def add_node(self, op: Op, inputs, shape: Shape, name: str | None = None,
                 origin: Any = None) -> int:
        """Append a node and return its id. Operands must already exist."""
        ids = tuple(int(i) for i in inputs)
        nid = len(self.nodes)
        for i in ids:
            if not 0 <= i < nid:
                raise GraphError(
                    f"operand %{i} of new node %{nid} ({op.kind}) does not precede it"
                )
        if not isinstance(shape, Shape):
            raise GraphError(f"node %{nid} needs a Shape, got {shape!r}")
        self.nodes.append(Node(nid, op, ids, shape, name, origin))
        return nid

    def add_node_unchecked(self, op: Op, inputs, shape: Shape, name=None, origin=None) -> int:
        """Append without operand checks (the text parser and the verifier's tests)."""
        nid = len(self.nodes)
        self.nodes.append(Node(nid, op, tuple(inputs), shape, name, origin))
        return nid

    def set_outputs(self, outputs) -> None:
        self.outputs = [int(getattr(o, "id", o)) for o in outputs]

    # ── queries ──────────────────────────────────────────────────────────
    def users(self, nid: int) -> list[int]:
        """Ids of the nodes that read ``nid`` (each once, in order)."""
        return [n.id for n in self.nodes if nid in n.inputs]

    def users_map(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in dict.fromkeys(n.inputs):
                if i in out:
                    out[i].append(n.id)
        return out

    def topo_order(self) -> list[int]:
        """A topological order (Kahn, smallest id first). GraphError on a cycle."""
        import heapq

        indeg = {n.id: len(set(n.inputs)) for n in self.nodes}
        users = self.users_map()
        ready = [i for i, d in indeg.items() if d == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users.get(i, ()):
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) != len(self.nodes):
            raise GraphError(f"graph @{self.name} has a cycle")
        return order

    def input_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "Input"]

    def param_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "Param"]

    def structurally_equal(self, other: "Graph") -> bool:
        """Deep equality: name, every node (op, operands, shape, label) and outputs."""
        if not isinstance(other, Graph):
            return False
        if (self.name, self.outputs, len(self)) != (other.name, other.outputs, len(other)):
            return False
        for a, b in zip(self.nodes, other.nodes):
            if (a.op, a.inputs, a.shape, a.name) != (b.op, b.inputs, b.shape, b.name):
                return False
        return True

    __eq__ = structurally_equal
    __hash__ = None

    def copy(self) -> "Graph":
        g = Graph(self.name)
        g.nodes = [Node(n.id, n.op, n.inputs, n.shape, n.name, n.origin) for n in self.nodes]
        g.outputs = list(self.outputs)
        return g

    def to_text(self) -> str:
        from .text import print_graph

        return print_graph(self)

    __str__ = to_text

    def __repr__(self) -> str:
        return f"<Graph @{self.name}: {len(self)} nodes, outputs {self.outputs}>"

    def _repr_svg_(self) -> str | None:
        """Jupyter's picture of the graph; None (not an error) without Graphviz."""
        from ..draw import DrawError, draw_svg

        try:
            return draw_svg(self)
        except DrawError:
            return None

    def _repr_html_(self) -> str:
        """Jupyter's rich form: the SVG drawing, or the text form when it cannot be drawn."""
        import html

        svg = self._repr_svg_()
        return svg if svg is not None else f"<pre>{html.escape(self.to_text())}</pre>"

    @staticmethod
    def parse(text: str) -> "Graph":
        from .text import parse

        return parse(text)


def _install_builder():
    from .builder import BuilderMethods

    for name, fn in vars(BuilderMethods).items():
        if not name.startswith("__") or name == "__getattr__":
            setattr(Graph, name, fn)


_install_builder()
