"""Import-time evaluation of a value RLX needs in a payload (a shape, a range's bounds).

When a converter needs a value that the ONNX graph computes, and everything it is computed
from is known at import time (constants, initializers, inputs given as static values), the
computing nodes are run once with ONNX's own reference: the payload gets ONNX's value.
"""
from __future__ import annotations

import numpy as np


def evaluate(ctx, name: str):
    """``name``'s value computed from import-time values only, or None."""
    leaves: dict = {}
    nodes: dict = {}
    folded: set = set()
    todo = [name]
    while todo:
        n = todo.pop()
        if not n or n in leaves or n in nodes:
            continue
        if n in ctx.static:
            leaves[n] = ctx.static[n]
        elif n in ctx.weights:
            leaves[n] = ctx.weights[n]
        elif n in ctx.static_inputs and n not in ctx.producers:
            leaves[n] = np.asarray(ctx.static_inputs[n])
            folded.add(n)
        elif n in ctx.producers:
            idx, node = ctx.producers[n]
            if not _deterministic(node):
                return None
            nodes[n] = (idx, node)
            todo.extend(_reads(node))
        else:
            return None
    order = sorted({id(nd): (i, nd) for i, nd in nodes.values()}.values(),
                   key=lambda p: p[0])
    try:
        value = _run([nd for _, nd in order], leaves, name, ctx.opset)
    except Exception:  # noqa: BLE001 - a chain ONNX's reference cannot run stays dynamic
        return None
    if not isinstance(value, np.ndarray):
        return None
    ctx.folded.update(folded)
    return value


def _run(nodes, leaves, name, opset):
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         v.shape) for k, v in leaves.items()]
    out = [helper.make_empty_tensor_value_info(name)]
    model = helper.make_model(helper.make_graph(nodes, "static", ins, out),
                              opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(leaves))[0]


def _deterministic(node) -> bool:
    random = node.op_type.startswith("Random") or node.op_type in ("Bernoulli", "Multinomial")
    return node.domain in ("", "ai.onnx") and not random


def _reads(node) -> list:
    """The names ``node`` reads: its inputs, and outer names its bodies read."""
    names = list(node.input)
    for a in node.attribute:
        for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
            local = {vi.name for vi in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                local.update(n.output)
            for n in g.node:
                names.extend(r for r in _reads(n) if r and r not in local)
    return names
