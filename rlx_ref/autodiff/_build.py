"""Node-building helpers the transform rules share (each appends to the graph being built).

They take and return node ids of ``g`` and read shapes from it; every one is a plain
registry op, so a gradient graph is an ordinary graph the verifier and every backend accept.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ..ops.leaves import ConstantAttrs, constant_bytes


_LOADED: set = set()


def load_rule_modules(prefix: str) -> None:
    """Import once every module of this package whose name starts with ``prefix``
    (``rules_``, ``batch_``): each registers its rules in its transform's table."""
    if prefix in _LOADED:
        return
    import importlib
    import pkgutil

    from . import __path__ as here

    for name in sorted(m.name for m in pkgutil.iter_modules(here)):
        if name.startswith(prefix):
            importlib.import_module(f"{__package__}.{name}")
    _LOADED.add(prefix)


class AutodiffError(ValueError):
    """A graph the transform cannot differentiate; the message names the node and why."""


class NodeRuleContext:
    """What every transform's rule context shares: the node's payload and shape, and an
    error naming the node (``error`` is the transform's error type)."""

    error = AutodiffError

    @property
    def attrs(self):
        return self.node.attrs

    @property
    def out_shape(self):
        return self.node.shape

    def fail(self, why: str):
        return self.error(f"{self.where}: {why}")


def static_dims(g: Graph, x: int, what: str) -> tuple:
    s = g.shape(x)
    if not s.is_static:
        raise AutodiffError(f"{what}: needs static dims, got {s}")
    return s.static_dims()


def constant(g: Graph, value, dtype: DType, dims=()) -> int:
    """A Constant of ``dims`` filled with ``value`` (an array is stored as it is)."""
    arr = np.asarray(value)
    if arr.shape != tuple(dims):
        arr = np.broadcast_to(arr, tuple(dims))
    arr = np.array(arr, dtype=dtype.np, order="C")      # (ascontiguousarray makes 0-d 1-d)
    return g.op("Constant", (), ConstantAttrs(constant_bytes(arr)),
                shape=Shape(arr.shape, dtype))


def scalar(g: Graph, value, dtype: DType) -> int:
    """A 0-d Constant: broadcasts against any operand without raising its rank."""
    return constant(g, np.asarray(value), dtype, ())


def zeros(g: Graph, shape: Shape) -> int:
    """Zeros of ``shape`` as a broadcast of one element (no large literal)."""
    return expand(g, scalar(g, 0, shape.dtype), shape.dims)


def binary(g: Graph, op: str, a: int, b: int) -> int:
    return g.op("Binary", (a, b), op=op)


def unary(g: Graph, op: str, x: int) -> int:
    return g.op("Activation", (x,), op=op)


def cast(g: Graph, x: int, dtype: DType) -> int:
    return x if g.shape(x).dtype is dtype else g.op("Cast", (x,), to=dtype)


def reshape(g: Graph, x: int, dims) -> int:
    dims = tuple(dims)
    if g.shape(x).dims == dims:
        return x
    return g.op("Reshape", (x,), new_shape=tuple(int(d) for d in dims))


def expand(g: Graph, x: int, dims) -> int:
    """``x`` broadcast to ``dims`` (numpy rules), rank padded on the left first."""
    dims = tuple(dims)
    have = g.shape(x).dims
    if have == dims:
        return x
    if len(have) < len(dims):
        x = reshape(g, x, (1,) * (len(dims) - len(have)) + tuple(have))
    return g.op("Expand", (x,), target_shape=tuple(int(d) for d in dims))


def reduce_sum(g: Graph, x: int, axes, keep_dim: bool) -> int:
    axes = tuple(sorted(axes))
    if not axes:
        return x
    return g.op("Reduce", (x,), op="Sum", axes=axes, keep_dim=keep_dim)


def unbroadcast(g: Graph, grad: int, target: Shape) -> int:
    """Sum ``grad`` over the axes a broadcast to its shape stretched, back to ``target``."""
    have = g.shape(grad).dims
    if have == target.dims:
        return grad
    extra = len(have) - len(target.dims)
    axes = list(range(extra)) + [extra + i for i, d in enumerate(target.dims)
                                 if d == 1 and have[extra + i] != 1]
    return reshape(g, reduce_sum(g, grad, axes, keep_dim=True), target.dims)


def broadcast_to_input(g: Graph, v: int, x_dims: tuple, axes, keep_dim: bool) -> int:
    """A reduction's value or gradient (reduced over ``axes``) spread back over ``x_dims``."""
    if not keep_dim:
        kept = tuple(1 if i in axes else d for i, d in enumerate(x_dims))
        v = reshape(g, v, kept)
    return expand(g, v, x_dims)


def transpose(g: Graph, x: int, perm) -> int:
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return x
    return g.op("Transpose", (x,), perm=perm)


def swap_last_two(g: Graph, x: int) -> int:
    r = g.shape(x).rank
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return transpose(g, x, perm)


def inverse_perm(perm) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def add_all(g: Graph, parts: list) -> int:
    """The sum of ``parts`` (per-consumer contributions), left to right."""
    out = parts[0]
    for p in parts[1:]:
        out = binary(g, "Add", out, p)
    return out
