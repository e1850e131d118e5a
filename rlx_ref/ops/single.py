"""One-op graphs: build, verify and run a single op on the oracle (tests, docs, conformance)."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph, Op
from ..ir.shape import Shape
from .opdef import Sample, get


def single_op_graph(kind: str, attrs, inputs, out: Shape | None = None,
                    name: str | None = None) -> Graph:
    """Graph ``@<kind>``: one Input per operand (``x0, x1, ...``), the op node, return it.

    ``inputs`` holds arrays or Shapes. The output shape is inferred unless ``out`` is given.
    """
    d = get(kind)
    g = Graph(name or kind.lower())
    ids, shapes = [], []
    for i, x in enumerate(inputs):
        s = x if isinstance(x, Shape) else Shape(np.shape(x), DType.of(np.asarray(x)))
        ids.append(g.add_node(Op("Input", get("Input").attrs(f"x{i}")), [], s))
        shapes.append(s)
    shape = out if out is not None else d.infer_shape(shapes, attrs)
    if shape is None:
        raise ValueError(f"{kind} has no shape rule: pass the declared output shape `out`")
    g.set_outputs([g.add_node(Op(kind, attrs), ids, shape)])
    return g


def run_single(kind: str, attrs, *arrays, out: Shape | None = None, float64: bool = False):
    """Run one op on the oracle and return its output array."""
    from ..interpret import interpret

    g = single_op_graph(kind, attrs, arrays, out)
    return interpret(g, {f"x{i}": a for i, a in enumerate(arrays)}, float64=float64)[0]


def run_sample(kind: str, sample: Sample, float64: bool = False):
    return run_single(kind, sample.attrs, *sample.inputs, out=sample.out, float64=float64)


def verify_single(kind: str, attrs, inputs, out: Shape | None = None) -> list[str]:
    """Verifier messages (``at %N: ...``) of a one-op graph; empty when it is valid."""
    from ..ir.verify import verify

    return [str(e) for e in verify(single_op_graph(kind, attrs, inputs, out))]
