"""The explicit builder: Graph methods mirroring pyrlx (input, param, binary, matmul...).

Every method appends one node whose shape is inferred from the registry, after the
op's local checks; a mistake raises ``BuildError`` naming the op, operands and shapes.
Methods return node ids (ints). ``rlx_ref.ir.dsl`` wraps the same calls in operators.
"""
from __future__ import annotations

import math
import re

import numpy as np

from .dtype import DType
from .graph import Op
from .shape import Shape, ShapeError


class BuildError(ValueError):
    """A node could not be built: wrong operand shapes/dtypes or payload."""


class BuildArgumentError(BuildError, TypeError):
    """A builder method was called with arguments its signature does not take."""


def with_usage(fn):
    """``fn`` whose bad-argument TypeError names the parameters it takes (and close ones)."""
    import functools
    import inspect

    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def method(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            try:
                sig.bind(*args, **kwargs)
            except TypeError:
                raise BuildArgumentError(_usage(fn.__name__, sig, kwargs, e)) from None
            raise
    return method


def _usage(name: str, sig, kwargs: dict, err: Exception) -> str:
    from .pyrlx_names import did_you_mean

    params = [p for p in sig.parameters.values() if p.name != "self"]
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    bad = [k for k in kwargs if k not in names]
    hint = "".join(did_you_mean(k, names) for k in bad[:1])
    shown = ", ".join(str(p) for p in params)
    return (f"{name}(): {err.args[0].split('() ', 1)[-1]}{hint}; "
            f"usage: {name}({shown}); valid keywords: {', '.join(names) or 'none'}")


def _dtype(d) -> DType:
    return d if isinstance(d, DType) else DType.parse(str(d))


def snake(kind: str) -> str:
    """``LayerNorm2d`` → ``layer_norm2d``; ``ResizeNearest2x`` → ``resize_nearest2x``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kind).lower()


def encode_literal(value, dtype: DType) -> bytes:
    """RLX's scalar-literal rule: a Python scalar as one element of ``dtype``.

    ValueError when the value is out of range, non-integral for an integer dtype, or an
    int beyond 2**53 (not exact in f64); TypeError for non-numeric values.
    """
    from ..hotpaths import core

    if isinstance(value, (np.generic,)):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"a scalar literal must be bool, int or float, got "
                        f"{type(value).__name__} {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        raise ValueError(f"integer literal {value} is beyond 2**53 and not exact")
    if dtype.is_bool:
        if value not in (0, 1):
            raise ValueError(f"literal {value!r} is not a bool (expected 0/1/True/False)")
        return bytes([int(bool(value))])
    if dtype.is_int:
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise ValueError(f"literal {value!r} is not integral, as dtype {dtype} needs")
        from .dtype import int_range

        lo, hi = int_range(dtype)
        if not lo <= int(value) <= hi:
            raise ValueError(f"literal {value!r} is out of range for {dtype} [{lo}, {hi}]")
        return core.scalar_bytes(int(value), dtype.display)
    if dtype in (DType.F32, DType.F64, DType.F16):
        if dtype is not DType.F64 and math.isfinite(value) and \
                abs(value) > float(np.finfo(dtype.np).max):
            raise ValueError(f"literal {value!r} is out of range for {dtype}")
        return core.scalar_bytes(float(value), dtype.display)
    if dtype is DType.BF16:
        if math.isfinite(value) and abs(value) > float(np.finfo(dtype.np).max):
            raise ValueError(f"literal {value!r} is out of range for {dtype}")
        return np.array(value, dtype.np).tobytes()
    return np.array(value, dtype.np).tobytes()


def _node_id(ref, where: str) -> int:
    """A node id from an int or a DSL node; a float or other value is an error, not a cast."""
    ref = getattr(ref, "id", ref)
    if isinstance(ref, bool) or not isinstance(ref, (int, np.integer)):
        raise BuildError(f"{where}: operand {ref!r} is not a node id (an int, or a DSL Node); "
                         "make a literal with constant() first")
    return int(ref)


class BuilderMethods:
    """Mixed into ``Graph``: every method appends a node and returns its id."""

    # ── the generic entry point ────────────────────────────────────────────
    def op(self, kind: str, inputs=(), payload=None, /, *, shape: Shape | None = None,
           label: str | None = None, **fields) -> int:
        """Append ``kind`` with ``payload`` (an attrs object) or its ``fields`` as keywords.

        The shape is inferred unless ``shape`` is given.

        ``label`` is the node's optional debug name (``#"label"`` in the text form).
        ``kind``, ``inputs`` and ``payload`` are positional-only so that a payload field
        may be called ``kind`` (Pool's). Field names and op-name strings may be pyrlx's
        (``op="add"``, ``op="<"``; see ``pyrlx_names``).
        """
        from ..ops.codec import payload_problems
        from ..ops.opdef import OpError, get
        from .pyrlx_names import normalize_fields

        d = get(kind)
        attrs = payload
        if attrs is None and (fields or d.payload != "unit"):
            fields = normalize_fields(kind, d.attrs, fields)
            try:
                attrs = d.make_attrs(**fields)
            except OpError as e:
                raise BuildError(f"cannot build {kind}: {e}") from None
        ids = [_node_id(i, kind) for i in inputs]
        for i in ids:
            if not 0 <= i < len(self.nodes):
                raise BuildError(f"{kind}: operand %{i} does not exist in @{self.name}")
        shapes = [self.nodes[i].shape for i in ids]
        where = f"{kind} of ({', '.join(f'%{i}: {s}' for i, s in zip(ids, shapes))})"
        if d.arity is not None and len(ids) != d.arity:
            raise BuildError(f"{where}: {kind} takes {d.arity} operands, got {len(ids)}")
        if d.arity is None and len(ids) < d.min_arity:
            raise BuildError(f"{where}: {kind} takes at least {d.min_arity} operands")
        bad = payload_problems(attrs)
        if bad:     # before the rules below, which assume each field holds its RLX type
            raise BuildError(f"at %{len(self.nodes)}: {where}: {bad[0]} in {kind}'s payload")
        try:
            inferred = d.infer_shape(shapes, attrs)
            if shape is None:
                shape = inferred
            if shape is None:
                raise BuildError(f"{where}: {kind} has no shape rule; pass shape=")
            if d.check is not None:
                d.check(shapes, attrs, shape)
        except (OpError, ShapeError) as e:
            raise BuildError(f"at %{len(self.nodes)}: {where}: {e}") from None
        return self.add_node(Op(kind, attrs), ids, shape, label)

    # ── leaves ─────────────────────────────────────────────────────────────
    def input(self, name: str, shape, dtype="f32") -> int:
        return self.op("Input", (), shape=Shape(shape, _dtype(dtype)), name=name)

    def param(self, name: str, shape, dtype="f32") -> int:
        return self.op("Param", (), shape=Shape(shape, _dtype(dtype)), name=name)

    def constant(self, value, dtype=None) -> int:
        """A Constant from an array or scalar (dtype defaults to the array's, f32 for floats)."""
        from ..ops.leaves import ConstantAttrs, constant_bytes

        if np.isscalar(value) and dtype is not None:
            dt = _dtype(dtype)
            return self.op("Constant", (), ConstantAttrs(encode_literal(value, dt)),
                           shape=Shape([], dt))
        arr = np.asarray(value)
        if dtype is None and arr.dtype == np.float64:
            dtype = "f32"
        dt = _dtype(dtype) if dtype is not None else DType.of(arr)
        arr = arr.astype(dt.np)
        return self.op("Constant", (), ConstantAttrs(constant_bytes(arr)),
                       shape=Shape(arr.shape, dt))

    def set_outputs(self, outputs) -> None:
        """The graph's results, in order (node ids or DSL nodes)."""
        ids = [_node_id(o, "set_outputs") for o in outputs]
        bad = [i for i in ids if not 0 <= i < len(self.nodes)]
        if bad:
            raise BuildError(f"set_outputs: %{bad[0]} does not exist in @{self.name} "
                             f"({len(self.nodes)} nodes)")
        self.outputs = ids

    def output(self, *outputs) -> None:
        """The DSL's spelling of ``set_outputs``: ``g.output(y)`` or ``g.output(a, b)``."""
        self.set_outputs(outputs[0] if len(outputs) == 1 and
                         isinstance(outputs[0], (list, tuple)) else outputs)

    def __getattr__(self, name):
        from .pyrlx_names import unknown_method

        if name.startswith("__"):
            raise AttributeError(name)
        raise unknown_method(type(self).__name__, name, dir(type(self)))

    def shape_of(self, nid) -> tuple[list, str]:
        """pyrlx's ``shape_of``: (dims, dtype display name)."""
        s = self.node(int(getattr(nid, "id", nid))).shape
        return list(s.dims), s.dtype.display

    # ── elementwise ────────────────────────────────────────────────────────
    def binary(self, op: str, a, b) -> int:
        return self.op("Binary", (a, b), op=op)

    def add(self, a, b):
        return self.binary("Add", a, b)

    def sub(self, a, b):
        return self.binary("Sub", a, b)

    def mul(self, a, b):
        return self.binary("Mul", a, b)

    def div(self, a, b):
        return self.binary("Div", a, b)

    def activation(self, kind: str, x) -> int:
        return self.op("Activation", (x,), op=kind)

    def compare(self, op: str, a, b) -> int:
        return self.op("Compare", (a, b), op=op)

    def where_(self, cond, a, b) -> int:
        return self.op("Where", (cond, a, b))

    def cast(self, x, to) -> int:
        return self.op("Cast", (x,), to=_dtype(to))

    def matmul(self, a, b) -> int:
        return self.op("MatMul", (a, b))

    def reduce(self, x, op: str, axes, keep_dim: bool = False) -> int:
        return self.op("Reduce", (x,), op=op, axes=tuple(axes), keep_dim=keep_dim)

    def sum(self, x, axes, keep_dim: bool = False):
        return self.reduce(x, "Sum", axes, keep_dim)

    def mean(self, x, axes, keep_dim: bool = False):
        return self.reduce(x, "Mean", axes, keep_dim)

    def softmax(self, x, axis: int = -1) -> int:
        return self.op("Softmax", (x,), axis=axis)

    def reshape(self, x, new_shape) -> int:
        return self.op("Reshape", (x,), new_shape=tuple(new_shape))

    def transpose(self, x, perm) -> int:
        return self.op("Transpose", (x,), perm=tuple(perm))

    def concat(self, inputs, axis: int) -> int:
        return self.op("Concat", tuple(inputs), axis=axis)


def _activation_method(kind: str):
    def method(self, x):
        return self.activation(kind, x)
    method.__name__ = snake(kind)
    method.__doc__ = f"Activation {kind}."
    return method


def _compare_method(kind: str):
    def method(self, a, b):
        return self.compare(kind, a, b)
    method.__name__ = kind.lower() + "_"
    return method


def _generic_method(kind: str):
    def method(self, *inputs, shape=None, label=None, **fields):
        return self.op(kind, inputs, shape=shape, label=label, **fields)
    method.__name__ = snake(kind)
    method.__doc__ = f"Append a {kind} node: operands, then its payload fields as keywords."
    return method


def install_registry_methods(cls) -> None:
    """Add pyrlx's methods, then one snake_case method per registered kind (and per
    activation/comparison) that no earlier method already names."""
    import inspect

    from ..ops.elementwise import ACTIVATIONS, COMPARES
    from ..ops.opdef import all_opdefs
    from .pyrlx_names import install_pyrlx_methods

    for name, fn in list(vars(BuilderMethods).items()):
        # a wrong keyword (softmax(x, dim=-1)) names the parameters instead of a bare TypeError
        if not name.startswith("_") and inspect.isfunction(fn):
            setattr(cls, name, with_usage(fn))
    install_pyrlx_methods(cls)
    for d in all_opdefs():
        if not hasattr(cls, snake(d.kind)):
            setattr(cls, snake(d.kind), _generic_method(d.kind))
    for k in ACTIVATIONS:
        if not hasattr(cls, snake(k)):
            setattr(cls, snake(k), _activation_method(k))
    for k in COMPARES:
        if not hasattr(cls, k.lower() + "_"):
            setattr(cls, k.lower() + "_", _compare_method(k))
