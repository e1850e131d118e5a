"""The DSL: ``with rlx_ref.graph("mlp") as g:`` and Python operators on ``Node`` handles.

    with rlx_ref.graph("mlp") as g:
        x = g.input("x", [4, 8])
        w = g.param("w", [8, 16])
        y = (x @ w + 1.0).relu()
        g.output(y)
    graph = g.graph

A Python scalar next to a node becomes a rank-0 Constant of that node's dtype (RLX's
scalar-literal rule, see ``builder.encode_literal``). Comparisons return bool nodes.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .builder import BuildError, encode_literal, snake, with_usage
from .dtype import DType
from .graph import Graph
from .shape import Shape


class Node:
    """A handle on one node of a graph being built; operators append new nodes."""

    __slots__ = ("builder", "id")
    __array_priority__ = 1000

    def __init__(self, builder: "GraphBuilder", nid: int):
        self.builder, self.id = builder, nid

    # ── inspection ─────────────────────────────────────────────────────────
    @property
    def shape(self) -> Shape:
        """The node's output shape (dims and dtype)."""
        return self.builder.graph.nodes[self.id].shape

    @property
    def dtype(self) -> DType:
        """The node's output dtype."""
        return self.shape.dtype

    @property
    def dims(self) -> tuple:
        """The node's output dims."""
        return self.shape.dims

    def __repr__(self) -> str:
        return f"<Node %{self.id}: {self.builder.graph.nodes[self.id]}>"

    __hash__ = object.__hash__

    # ── operators ──────────────────────────────────────────────────────────
    def _lift(self, other) -> "Node":
        if isinstance(other, Node):
            if other.builder is not self.builder:
                raise BuildError(f"%{other.id} belongs to another graph")
            return other
        if isinstance(other, (bool, int, float, np.generic)):
            return self.builder.scalar(other, self.dtype)
        raise TypeError(f"cannot combine a {self.dtype} node with "
                        f"{type(other).__name__} {other!r}")

    def _bin(self, op, other, reverse=False):
        o = self._lift(other)
        a, b = (o, self) if reverse else (self, o)
        return self.builder._wrap(self.builder.graph.binary(op, a.id, b.id))

    def __add__(self, o): return self._bin("Add", o)
    def __radd__(self, o): return self._bin("Add", o, True)
    def __sub__(self, o): return self._bin("Sub", o)
    def __rsub__(self, o): return self._bin("Sub", o, True)
    def __mul__(self, o): return self._bin("Mul", o)
    def __rmul__(self, o): return self._bin("Mul", o, True)
    def __truediv__(self, o): return self._bin("Div", o)
    def __rtruediv__(self, o): return self._bin("Div", o, True)
    def __pow__(self, o): return self._bin("Pow", o)
    def __rpow__(self, o): return self._bin("Pow", o, True)
    def __mod__(self, o): return self._bin("Mod", o)
    def __and__(self, o): return self._bin("BitAnd", o)
    def __or__(self, o): return self._bin("BitOr", o)
    def __xor__(self, o): return self._bin("BitXor", o)
    def __lshift__(self, o): return self._bin("Shl", o)
    def __rshift__(self, o): return self._bin("Shr", o)

    def __matmul__(self, o):
        return self.builder._wrap(self.builder.graph.matmul(self.id, self._lift(o).id))

    def __neg__(self):
        return self.activation("Neg")

    def __abs__(self):
        return self.activation("Abs")

    def _cmp(self, op, other):
        o = self._lift(other)
        return self.builder._wrap(self.builder.graph.compare(op, self.id, o.id))

    def __eq__(self, o): return self._cmp("Eq", o)  # noqa: E704
    def __ne__(self, o): return self._cmp("Ne", o)  # noqa: E704
    def __lt__(self, o): return self._cmp("Lt", o)  # noqa: E704
    def __le__(self, o): return self._cmp("Le", o)  # noqa: E704
    def __gt__(self, o): return self._cmp("Gt", o)  # noqa: E704
    def __ge__(self, o): return self._cmp("Ge", o)  # noqa: E704

    def __bool__(self):
        raise TypeError("a graph Node has no truth value while building; use where()")

    # ── methods ────────────────────────────────────────────────────────────
    def activation(self, kind: str) -> "Node":
        """An Activation of ``kind`` (``"Gelu"``, pyrlx's ``"gelu"`` too) on this node."""
        return self.builder._wrap(self.builder.graph.activation(kind, self.id))

    def cast(self, dtype) -> "Node":
        """A Cast to ``dtype`` (a DType or its name, ``"f16"``)."""
        return self.builder._wrap(self.builder.graph.cast(self.id, dtype))

    astype = cast

    def sum(self, axes, keep_dim=False):
        """Reduce Sum over ``axes`` (an int or a list; negative counts from the end)."""
        return self.reduce("Sum", axes, keep_dim)

    def mean(self, axes, keep_dim=False):
        """Reduce Mean over ``axes``."""
        return self.reduce("Mean", axes, keep_dim)

    def max(self, axes, keep_dim=False):
        """Reduce Max over ``axes``."""
        return self.reduce("Max", axes, keep_dim)

    def min(self, axes, keep_dim=False):
        """Reduce Min over ``axes``."""
        return self.reduce("Min", axes, keep_dim)

    def prod(self, axes, keep_dim=False):
        """Reduce Prod over ``axes``."""
        return self.reduce("Prod", axes, keep_dim)

    def reduce(self, op, axes, keep_dim=False):
        """A Reduce of ``op`` (Sum, Mean, Max, Min, Prod, ...) over ``axes``."""
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        axes = tuple(a % max(len(self.dims), 1) for a in axes)
        return self.builder._wrap(self.builder.graph.reduce(self.id, op, axes, keep_dim))

    def softmax(self, axis: int = -1):
        """Softmax along ``axis`` (RLX names it ``axis``, not ``dim``)."""
        return self.builder._wrap(self.builder.graph.softmax(self.id, axis))

    def reshape(self, *shape):
        """Reshape to ``shape`` (``x.reshape(2, 3)`` or ``x.reshape([2, 3])``)."""
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return self.builder._wrap(self.builder.graph.reshape(self.id, shape))

    def transpose(self, *perm):
        """Transpose by ``perm`` (all axes reversed when none is given)."""
        perm = perm[0] if len(perm) == 1 and not isinstance(perm[0], int) else perm
        if not perm:
            perm = tuple(reversed(range(len(self.dims))))
        return self.builder._wrap(self.builder.graph.transpose(self.id, perm))

    @property
    def T(self):
        """The transpose with all axes reversed."""
        return self.transpose()

    def where(self, on_true, on_false):
        """``self`` as the condition: ``on_true`` where non-zero, else ``on_false``."""
        t = on_true if isinstance(on_true, Node) else None
        f = on_false if isinstance(on_false, Node) else None
        ref = t if t is not None else f
        if ref is None:
            raise TypeError("where() needs at least one Node branch to take the dtype from")
        t = t if t is not None else ref._lift(on_true)
        f = f if f is not None else ref._lift(on_false)
        return self.builder._wrap(self.builder.graph.where_(self.id, t.id, f.id))

    where_ = where      # pyrlx's spelling

    def __index__(self) -> int:
        """The node id, as pyrlx's Node gives it (``int(x)``)."""
        return self.id

    __int__ = __index__

    def __getattr__(self, name):
        return _method(self, name)

    def __dir__(self):
        """The methods ``__getattr__`` builds too (activations, pyrlx's, one per kind)."""
        return sorted(set(object.__dir__(self)) | set(node_method_names()))


def node_method_names() -> dict:
    """Every method a DSL Node answers beyond its class's own: name -> what it builds."""
    from ..ops.elementwise import ACTIVATIONS
    from ..ops.opdef import all_opdefs
    from .pyrlx_names import METHODS

    out = {snake(d.kind): d.kind for d in all_opdefs()}
    out.update({name: sig.kind for name, sig in METHODS.items()})
    out.update({snake(k): "Activation" for k in ACTIVATIONS})
    return out


def _method(node: Node, name: str):
    """``x.relu()``, ``x.layer_norm(g, b, eps=...)``, ``x.narrow(0, 2, 5)``: any activation,
    pyrlx method (``pyrlx_names.METHODS``) or registry kind, with ``node`` first."""
    from ..ops.elementwise import ACTIVATIONS
    from ..ops.opdef import all_opdefs
    from .pyrlx_names import METHODS, unknown_method

    if name.startswith("__"):
        raise AttributeError(name)
    for k in ACTIVATIONS:
        if snake(k) == name:
            return lambda: node.activation(k)
    known = set(METHODS) | {snake(d.kind) for d in all_opdefs()}
    if name not in known:
        raise unknown_method("Node", name, known | set(dir(Node)) |
                             {snake(k) for k in ACTIVATIONS})

    def call(*args, **kwargs):
        return node.builder._call(name, (node,) + args, kwargs, lift_all=name not in METHODS)
    return call


class GraphBuilder:
    """The object bound by ``with rlx_ref.graph(name) as g``; wraps a ``Graph``.

    ``g.outputs = [y]`` (pyrlx's spelling) sets the outputs like ``g.output(y)``; any other
    unknown attribute assignment raises rather than being silently kept.
    """

    __slots__ = ("graph",)

    def __init__(self, name: str):
        self.graph = Graph(name)

    def _wrap(self, nid: int) -> Node:
        return Node(self, nid)

    @property
    def raw(self) -> Graph:
        """pyrlx's name for the graph being built (``g.graph``)."""
        return self.graph

    @property
    def outputs(self) -> list:
        """The outputs set so far, as nodes."""
        return [Node(self, i) for i in self.graph.outputs]

    @outputs.setter
    def outputs(self, nodes) -> None:
        if isinstance(nodes, Node):
            nodes = [nodes]
        self.graph.set_outputs([self._own(n).id for n in nodes])

    def _own(self, n) -> Node:
        if not isinstance(n, Node):
            raise BuildError(f"outputs must be Nodes of this graph, got {type(n).__name__} "
                             f"{n!r}")
        if n.builder is not self:
            raise BuildError(f"%{n.id} belongs to another graph")
        return n

    def _call(self, name: str, args, kwargs, lift_all: bool = False):
        """``graph.<name>(*args)`` with Nodes unwrapped and Python scalars at operand
        positions made rank-0 Constants of the first Node's dtype (as pyrlx's DSL does)."""
        from .pyrlx_names import SCALAR_OPERANDS

        fn = getattr(self.graph, name)
        where = SCALAR_OPERANDS.get(name, ())
        hint = next((a.dtype for a in args if isinstance(a, Node)), None)
        out = []
        for i, a in enumerate(args):
            lift = lift_all or i in where
            if lift and isinstance(a, (bool, int, float, np.generic)) and hint is not None:
                a = self.scalar(a, hint)
            out.append(_unwrap(a))
        res = fn(*out, **{k: _unwrap(v) for k, v in kwargs.items()})
        if isinstance(res, tuple) and res and all(isinstance(r, int) for r in res):
            return tuple(self._wrap(r) for r in res)
        return self._wrap(res) if isinstance(res, int) else res

    def input(self, name, shape, dtype="f32") -> Node:
        return self._wrap(self.graph.input(name, shape, dtype))

    def param(self, name, shape, dtype="f32") -> Node:
        return self._wrap(self.graph.param(name, shape, dtype))

    def constant(self, value, dtype=None) -> Node:
        return self._wrap(self.graph.constant(value, dtype))

    def scalar(self, value, dtype: DType) -> Node:
        """A rank-0 Constant of ``dtype`` from a Python scalar (RLX's literal rule)."""
        from ..ops.leaves import ConstantAttrs

        data = encode_literal(value, dtype)
        return self._wrap(self.graph.op("Constant", (), ConstantAttrs(data),
                                        shape=Shape([], dtype)))

    def output(self, *nodes) -> None:
        """Set the graph's outputs (in order)."""
        self.graph.set_outputs([self._own(n).id for n in nodes])

    def op(self, kind, /, *inputs, shape=None, **fields) -> Node:
        return self._wrap(self.graph.op(kind, [_unwrap(i) for i in inputs], shape=shape,
                                        **fields))

    def where(self, cond: Node, on_true, on_false) -> Node:
        return cond.where(on_true, on_false)

    def __getattr__(self, name):
        fn = getattr(self.graph, name)
        if not callable(fn):
            return fn

        def call(*args, **kwargs):
            return self._call(name, args, kwargs)
        return call


def _unwrap(v):
    """Node handles (also inside lists, as concat takes them) -> node ids."""
    if isinstance(v, Node):
        return v.id
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(x) for x in v)
    return v


for _name, _fn in list(vars(Node).items()):
    # x.softmax(dim=-1) names the parameters softmax takes instead of a bare TypeError
    if not _name.startswith("_") and callable(_fn) and not isinstance(_fn, property):
        setattr(Node, _name, with_usage(_fn))


@contextlib.contextmanager
def graph(name: str = "main", verify: bool = True):
    """Build a graph with the DSL; it is verified on exit (``g.graph`` holds it)."""
    b = GraphBuilder(name)
    yield b
    if verify:
        from .verify import verify_or_raise

        verify_or_raise(b.graph)
