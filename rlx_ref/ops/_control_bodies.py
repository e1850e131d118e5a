"""Small helpers to build and inspect the nested body graphs of If / While / Scan / CustomFn."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph, Op
from ..ir.shape import Shape
from .opdef import get, want


def body_inputs(body: Graph) -> list:
    """Declared shapes of the body's Input nodes, in node order (the binding order)."""
    return [n.shape for n in body.input_nodes()]


def body_outputs(body: Graph) -> list | None:
    """Shapes of the body's outputs; None when an output id is invalid (its verify says so)."""
    n = len(body.nodes)
    if any(not 0 <= o < n for o in body.outputs):
        return None
    return [body.nodes[o].shape for o in body.outputs]


def check_binding(body: Graph, role: str, operands: list, what: str) -> None:
    """The body declares one Input per operand, each with the operand's shape and dtype."""
    ins = body_inputs(body)
    want(len(ins) == len(operands),
         f"(C2) {role} declares {len(ins)} Op::Inputs but receives {len(operands)} {what}")
    for i, (decl, got) in enumerate(zip(ins, operands)):
        want(decl == got, f"(C3) {role} input #{i} is declared {decl} but is bound to {got}")


def truthy(value: np.ndarray, what: str) -> bool:
    """A one-element predicate is true when non-zero (NaN counts as true, as ``!= 0``)."""
    a = np.asarray(value)
    want(a.size == 1, f"{what} must hold exactly one element, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0] != 0)


def predicate_dtype_ok(dt: DType) -> bool:
    return dt.is_bool or dt.is_int or dt.is_float


# ── building bodies (samples, tests, docs) ─────────────────────────────────

def add(g: Graph, kind: str, attrs, *ids, shape: Shape | None = None) -> int:
    """Append ``kind`` to ``g`` with the registry's inferred shape (or ``shape``)."""
    d = get(kind)
    if shape is None:
        shape = d.infer_shape([g.nodes[i].shape for i in ids], attrs)
    return g.add_node(Op(kind, attrs), ids, shape)


def binary(g: Graph, op: str, a: int, b: int) -> int:
    return add(g, "Binary", get("Binary").attrs(op), a, b)


def constant(g: Graph, value, dtype: DType = DType.F32) -> int:
    from .leaves import constant_bytes

    arr = np.asarray(value, dtype.np)
    return add(g, "Constant", get("Constant").attrs(constant_bytes(arr)),
               shape=Shape(arr.shape, dtype))


def make_body(name: str, inputs: list, build, names=None) -> Graph:
    """Graph ``@name`` with one Input per shape in ``inputs``; ``build(g, *ids)`` returns the
    output id (or a list of them). Input names default to ``<name>_<i>``."""
    g = Graph(name)
    names = names or [f"{name}_{i}" for i in range(len(inputs))]
    ids = [g.add_node(Op("Input", get("Input").attrs(nm)), [], s)
           for nm, s in zip(names, inputs)]
    outs = build(g, *ids)
    g.set_outputs(outs if isinstance(outs, (list, tuple)) else [outs])
    return g
