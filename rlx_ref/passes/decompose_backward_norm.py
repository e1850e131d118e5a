"""Decompositions of the activation and normalization backward kinds into forward kinds
(Binary, Activation, Compare, Where, Reduce, Reshape, Constant, Cast), so a backend
without a kernel can run them and a second reverse pass can differentiate them.

Each kind's formula lives once, in its family file (``ops/backward_activation``,
``ops/backward_norm``), written against a math namespace. Here ``GraphMath`` evaluates it
on graph nodes: the nodes are the forward kinds whose references the numpy namespace
calls, in the same order, so on the oracle a decomposition computes bit for bit what the
op computes. Operands are cast to the op's work dtype first (f32, or f64 when an operand
is f64) and the result cast back once, as the references round.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ops.backward_activation import DERIVATIVES
from ..ops.backward_norm import RULES
from .decompose import constant, decomposes


class Node:
    """A node of the graph being rebuilt; arithmetic appends Binary nodes (a Python number
    becomes a 0-d Constant of the node's dtype, as numpy treats it)."""

    __slots__ = ("g", "id")

    def __init__(self, g, nid: int):
        self.g, self.id = g, nid

    @property
    def dtype(self) -> DType:
        return self.g.shape(self.id).dtype

    def lift(self, v) -> "Node":
        return v if isinstance(v, Node) else Node(self.g, constant(self.g, v, self.dtype))

    def _bin(self, op: str, other, swap: bool = False) -> "Node":
        a, b = (self.lift(other), self) if swap else (self, self.lift(other))
        return Node(self.g, self.g.op("Binary", (a.id, b.id), op=op))

    def __add__(self, o):
        return self._bin("Add", o)

    def __radd__(self, o):
        return self._bin("Add", o, swap=True)

    def __sub__(self, o):
        return self._bin("Sub", o)

    def __rsub__(self, o):
        return self._bin("Sub", o, swap=True)

    def __mul__(self, o):
        return self._bin("Mul", o)

    def __rmul__(self, o):
        return self._bin("Mul", o, swap=True)

    def __truediv__(self, o):
        return self._bin("Div", o)

    def __rtruediv__(self, o):
        return self._bin("Div", o, swap=True)

    def __neg__(self):
        return GraphMath.act("Neg", self)


class GraphMath:
    """``m`` for the decompositions: the graph counterpart of ``_backward_math.NUMPY``."""

    @staticmethod
    def act(name: str, x: Node) -> Node:
        return Node(x.g, x.g.op("Activation", (x.id,), op=name))

    @staticmethod
    def gt(a: Node, b) -> Node:
        return Node(a.g, a.g.op("Compare", (a.id, a.lift(b).id), op="Gt"))

    @staticmethod
    def minimum(a: Node, b) -> Node:
        return a._bin("Min", b)

    @staticmethod
    def where(cond: Node, a: Node, b) -> Node:
        return Node(a.g, a.g.op("Where", (cond.id, a.id, a.lift(b).id)))

    @staticmethod
    def sum(t: Node, axes) -> Node:
        if not axes:
            return t
        return Node(t.g, t.g.op("Reduce", (t.id,), op="Sum", axes=tuple(sorted(axes)),
                                keep_dim=True))

    @staticmethod
    def mean(t: Node, axes) -> Node:
        return Node(t.g, t.g.op("Reduce", (t.id,), op="Mean", axes=tuple(sorted(axes)),
                                keep_dim=True))

    @staticmethod
    def reshape(t: Node, dims) -> Node:
        if tuple(GraphMath.dims(t)) == tuple(dims):
            return t
        return Node(t.g, t.g.op("Reshape", (t.id,), new_shape=tuple(dims)))

    @staticmethod
    def dims(t: Node) -> tuple:
        return t.g.shape(t.id).dims


GRAPH = GraphMath()
PRODUCES = ("Binary", "Activation", "Compare", "Where", "Reduce", "Reshape", "Constant",
            "Cast")
KINDS = ("ReluBackward", "ActivationBackward") + tuple(RULES)   # what this module decomposes
FLOAT_DTYPES = (DType.F32, DType.F64, DType.F16, DType.BF16)
REASON = ("no kernel: rewritten into Binary, Activation, Compare, Where, Reduce, Reshape "
          "and Cast (in f32, or f64 when an operand is f64; 16-bit operands cast to f32 "
          "and the result back once)")


def _work_dtype(g, ins) -> DType:
    """f64 if any operand is f64, else f32 (16-bit operands are computed in f32)."""
    return DType.F64 if any(g.shape(i).dtype is DType.F64 for i in ins) else DType.F32


def _cast(g, nid: int, dt: DType) -> int:
    return nid if g.shape(nid).dtype is dt else g.op("Cast", (nid,), to=dt)


def _evaluate(g, node, ins, formula) -> int | None:
    """Cast the operands to the work dtype, append ``formula``'s nodes, cast the result
    to the node's dtype and lay it out as the node's declared shape."""
    if not all(g.shape(i).is_static for i in ins) or not node.shape.is_static:
        return None
    wd = _work_dtype(g, ins)
    out = formula(*[Node(g, _cast(g, i, wd)) for i in ins])
    nid = GRAPH.reshape(out, node.shape.dims).id
    return _cast(g, nid, node.shape.dtype)


# ── activations ────────────────────────────────────────────────────────────

@decomposes("ReluBackward", ("Compare", "Where", "Constant", "Cast"))
def lower_relu_backward(g, node, ins):
    """Where(x > 0, dy, 0)."""
    return _evaluate(g, node, ins, lambda x, dy: DERIVATIVES["Relu"][1](x, dy, GRAPH))


@decomposes("ActivationBackward", PRODUCES)
def lower_activation_backward(g, node, ins):
    """The kind's rule from DERIVATIVES: Activation, Binary, Compare and Where nodes."""
    rule = DERIVATIVES[node.attrs.kind][1]
    return _evaluate(g, node, ins, lambda x, dy: rule(x, dy, GRAPH))


# ── normalizations ─────────────────────────────────────────────────────────

def _norm_decomposition(kind: str):
    rule = RULES[kind]

    def lower(g, node, ins):
        return _evaluate(g, node, ins, lambda *ops: rule(GRAPH, node.attrs, *ops))
    lower.__name__ = f"lower_{kind}"
    lower.__doc__ = f"{kind}'s formula (ops/backward_norm.RULES) on graph nodes."
    return decomposes(kind, PRODUCES)(lower)


for _kind in RULES:
    _norm_decomposition(_kind)

__all__ = ["FLOAT_DTYPES", "GRAPH", "GraphMath", "KINDS", "Node", "REASON",
           "lower_activation_backward", "lower_relu_backward"]
