"""The import state: ONNX tensor names bound to RLX node ids or to static numpy values."""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape

# ONNX TensorProto element types RLX can hold; any other is not mappable.
ONNX_DTYPES = {1: DType.F32, 2: DType.U8, 3: DType.I8, 5: DType.I16, 6: DType.I32,
               7: DType.I64, 9: DType.BOOL, 10: DType.F16, 11: DType.F64, 12: DType.U32,
               14: DType.C64, 15: DType.C128, 16: DType.BF16}


class Unmappable(Exception):
    """A node (or one of its attributes) has no RLX form; the message says why."""

    def __init__(self, why: str, attribute: str | None = None):
        super().__init__(why)
        self.why, self.attribute = why, attribute


def dtype_of(elem_type: int, what: str) -> DType:
    """The RLX dtype of an ONNX element type, or Unmappable naming it."""
    if elem_type not in ONNX_DTYPES:
        import onnx

        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "undefined"
        raise Unmappable(f"{what} has element type {name}, which RLX has no dtype for")
    return ONNX_DTYPES[elem_type]


class Attrs:
    """A node's attributes; the driver reports any attribute a converter never read."""

    def __init__(self, node):
        from onnx import helper

        self._vals = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self.read: set = set()

    def get(self, name: str, default=None):
        self.read.add(name)
        v = self._vals.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def has(self, name: str) -> bool:
        return name in self._vals

    def unread(self) -> list:
        return [n for n in self._vals if n not in self.read]

    def only(self, name: str, allowed, default):
        """The attribute's value, Unmappable unless it is one of ``allowed``."""
        v = self.get(name, default)
        if v not in allowed:
            raise Unmappable(f"{name}={v!r} is not supported (RLX maps only "
                             f"{', '.join(map(repr, allowed))})", name)
        return v


class Ctx:
    """Bindings of one graph being imported, plus the helpers converters build with."""

    def __init__(self, graph, opset: int, static_inputs: dict | None = None):
        self.g = graph
        self.opset = opset
        self.ids: dict = {}           # ONNX name -> RLX node id
        self.static: dict = {}        # ONNX name -> numpy value known at import time
        self.pending: dict = {}       # graph inputs not yet materialized: name -> Shape
        self.static_inputs = dict(static_inputs or {})
        self.folded: set = set()      # graph inputs taken as static values
        self.weights: dict = {}       # float initializers: Params on first use as a tensor
        self.params: dict = {}        # the Params made so far: name -> array
        self.producers: dict = {}     # ONNX name -> (order, node) that computes it
        self.order = itertools.count()  # producers' order: a topological one
        self.domains: dict = {}       # other domains' opsets (their ops may have bodies)

    # ── reading operands ───────────────────────────────────────────────────
    def value(self, name: str):
        """The static value of ``name``, or None when it is known only at run time."""
        return self.static.get(name)

    def need(self, name: str, what: str) -> np.ndarray:
        """A static value, or Unmappable: RLX payloads need ``what`` at import time.

        A graph input listed in ``static_inputs`` is taken as that value here (and only
        here), so an operand RLX needs in a payload can be fed at import time."""
        v = self.value(name)
        if v is None and name in self.weights:
            v = self.weights[name]      # a weight read as an operand RLX needs statically
        if v is None and name in self.static_inputs and name not in self.ids:
            v = self.static[name] = np.asarray(self.static_inputs[name])
            self.folded.add(name)
        if v is None and name in self.producers:
            from .static_eval import evaluate

            v = evaluate(self, name)
        if v is None:
            raise Unmappable(f"{what} ({name!r}) must be known at import time (a constant "
                             f"or initializer); it is computed at run time")
        return v

    def id(self, name: str) -> int:
        """The RLX node of ``name``, materializing a Constant or Input on first use."""
        if name in self.ids:
            return self.ids[name]
        if name in self.static:
            self.ids[name] = self.const(self.static[name])
        elif name in self.weights:
            arr = self.weights[name]
            self.ids[name] = self.g.op("Param", (), shape=Shape(list(arr.shape), DType.of(arr)),
                                       name=name)
            self.params[name] = arr
        elif name in self.pending:
            shape = self.pending[name]
            self.ids[name] = self.g.op("Input", (), shape=shape, name=name)
        else:
            raise Unmappable(f"tensor {name!r} is not produced by any earlier node")
        return self.ids[name]

    def shape(self, name: str) -> tuple:
        if name in self.weights and name not in self.ids:
            return tuple(self.weights[name].shape)
        v = self.value(name) if name not in self.ids else None
        if v is not None:
            return tuple(v.shape)
        if name in self.pending and name not in self.ids:
            return tuple(self.pending[name].dims)
        return tuple(self.g.shape(self.id(name)).dims)

    def dtype(self, name: str) -> DType:
        if name in self.weights and name not in self.ids:
            return DType.of(self.weights[name])
        v = self.value(name) if name not in self.ids else None
        if v is not None:
            return DType.of(v)
        if name in self.pending and name not in self.ids:
            return self.pending[name].dtype
        return self.g.shape(self.id(name)).dtype

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    # ── building ───────────────────────────────────────────────────────────
    def const(self, value, dtype: DType | None = None) -> int:
        arr = np.asarray(value)
        dt = dtype or DType.of(arr)
        return self.g.constant(arr.astype(dt.np), dt)

    def scalar(self, value, dtype: DType) -> int:
        return self.const(np.asarray(value, dtype.np), dtype)

    def op(self, kind: str, inputs, /, **fields) -> int:
        return self.g.op(kind, tuple(inputs), **fields)

    def act(self, kind: str, x: int) -> int:
        return self.g.op("Activation", (x,), op=kind)

    def bin(self, kind: str, a: int, b: int) -> int:
        return self.g.op("Binary", (a, b), op=kind)

    def cmp(self, kind: str, a: int, b: int) -> int:
        return self.g.op("Compare", (a, b), op=kind)

    def where(self, c: int, a: int, b: int) -> int:
        return self.g.op("Where", (c, a, b))

    def cast(self, x: int, dt: DType) -> int:
        return x if self.g.shape(x).dtype is dt else self.g.op("Cast", (x,), to=dt)

    def reshape(self, x: int, dims) -> int:
        if tuple(self.g.shape(x).dims) == tuple(dims):
            return x
        return self.g.op("Reshape", (x,), new_shape=tuple(int(d) for d in dims))

    def dims(self, x: int) -> tuple:
        return tuple(self.g.shape(x).dims)

    def dt(self, x: int) -> DType:
        return self.g.shape(x).dtype

    def like(self, value, x: int) -> int:
        """A scalar constant of node ``x``'s dtype."""
        return self.scalar(value, self.dt(x))


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A non-negative axis, Unmappable when out of range."""
    a = int(axis)
    if not -max(rank, 1) <= a < max(rank, 1):
        raise Unmappable(f"{what}={axis} is out of range for rank {rank}", what)
    return a % max(rank, 1)


def input_shape(vi) -> Shape:
    """The static Shape of a graph input's ValueInfo, or Unmappable."""
    t = vi.type
    if not t.HasField("tensor_type"):
        raise Unmappable(f"graph input {vi.name!r} is not a tensor ({t.WhichOneof('value')})")
    tt = t.tensor_type
    dt = dtype_of(tt.elem_type, f"graph input {vi.name!r}")
    if not tt.HasField("shape"):
        raise Unmappable(f"graph input {vi.name!r} has no shape")
    dims = []
    for d in tt.shape.dim:
        if not d.HasField("dim_value"):
            raise Unmappable(f"graph input {vi.name!r} has a symbolic dim "
                             f"{d.dim_param!r}; RLX import needs static dims")
        dims.append(int(d.dim_value))
    return Shape(dims, dt)
