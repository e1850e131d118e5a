"""Two ways to run one formula written as a sequence of registry ops.

A fused kind's semantics is its RLX ``unfuse`` decomposition: a short program of primitive
kinds (MatMul, Expand, Binary, LayerNorm, Attention...). Each program is written once
(``_fused_forms``) against an emitter ``e`` with ``e.op(kind, inputs, shape=None,
**fields)``, ``e.dims(v)``, ``e.dtype(v)`` and ``e.constant(value, dtype)``:

- ``ArrayEmitter`` runs every step through the step kind's own OpDef reference, storing
  each result in the step's dtype as the interpreter does: this is the fused kind's oracle;
- ``GraphEmitter`` appends the steps as nodes: this is the decomposition a backend runs.

So a decomposed graph computes bit for bit what the fused op's oracle computes.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .leaves import ConstantAttrs, constant_bytes
from .opdef import RefCtx, get


def _attrs(d, payload, fields):
    if payload is not None:
        return payload
    if fields or d.payload != "unit":
        return d.make_attrs(**fields)
    return None


class ArrayEmitter:
    """Evaluates steps on numpy arrays with their OpDef references (the oracle)."""

    def __init__(self, float64: bool = False):
        self.float64 = float64

    def op(self, kind: str, inputs, payload=None, *, shape: Shape | None = None, **fields):
        d = get(kind)
        attrs = _attrs(d, payload, fields)
        inputs = [np.asarray(x) for x in inputs]
        shapes = [Shape(x.shape, DType.of(x)) for x in inputs]
        out = shape if shape is not None else d.infer_shape(shapes, attrs)
        if out is None:
            raise ValueError(f"{kind}: the step's shape cannot be inferred; pass shape=")
        ctx = RefCtx(attrs, out, self.float64)
        return np.asarray(d.reference(ctx, *inputs)).astype(ctx.out_np, copy=False)

    def constant(self, value, dtype: DType):
        arr = np.asarray(value).astype(dtype.np)
        return arr.astype(RefCtx(None, Shape(arr.shape, dtype), self.float64).out_np)

    @staticmethod
    def dims(v) -> tuple:
        return tuple(np.shape(v))

    @staticmethod
    def dtype(v) -> DType:
        return DType.of(np.asarray(v))


class GraphEmitter:
    """Appends steps to a graph as nodes (the decomposition)."""

    def __init__(self, graph):
        self.g = graph

    def op(self, kind: str, inputs, payload=None, *, shape: Shape | None = None, **fields):
        return self.g.op(kind, list(inputs), payload, shape=shape, **fields)

    def constant(self, value, dtype: DType):
        arr = np.asarray(value).astype(dtype.np)
        return self.g.op("Constant", (), ConstantAttrs(constant_bytes(arr)),
                         shape=Shape(arr.shape, dtype))

    def dims(self, v) -> tuple:
        return tuple(self.g.shape(v).dims)

    def dtype(self, v) -> DType:
        return self.g.shape(v).dtype


def run_form(form, ctx, arrays):
    """The oracle: ``form`` evaluated on ``arrays``, returned as ``ctx.out_np``."""
    e = ArrayEmitter(ctx.float64)
    out = form(e, ctx.attrs, *[np.asarray(x) for x in arrays])
    return np.asarray(out).astype(ctx.out_np, copy=False)


def form_graph(form, attrs, shapes):
    """A graph of ``form`` over inputs of ``shapes`` (for accuracy contracts)."""
    from ..ir.graph import Graph

    g = Graph("unfused")
    ins = [g.input(f"x{i}", s.dims, s.dtype) for i, s in enumerate(shapes)]
    g.set_outputs([form(GraphEmitter(g), attrs, *ins)])
    return g


def form_accuracy(form, c: float = 1.0):
    """An OpDef ``accuracy``: the composite of the decomposition's node contracts, each
    node's work counted ``c`` times (the composite's default, 2, lets a 3% error through
    in bf16 once two nodes round; one rounding per node is what the steps do)."""
    def accuracy(attrs, shapes, dtype):
        import dataclasses

        from ..conformance.accuracy import graph_accuracy

        acc = graph_accuracy(form_graph(form, attrs, shapes), dtype)
        return dataclasses.replace(acc, c=c) if acc.c else acc
    return accuracy
