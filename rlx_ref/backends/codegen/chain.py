"""What every kernel backend needs to render an elementwise node as one loop.

``chain_steps`` turns a standalone elementwise op or an ElementwiseRegion into a chain of
steps ``(kind, attrs, operands)`` with operands ``("Input", i)`` / ``("Step", j)``;
``read_mode`` says how the loop reads input i for output element i: ``full`` (flat index),
``scalar`` (element 0), ``mod`` (suffix broadcast: index % size) or ``strided`` (general
broadcast: per-axis element strides, 0 on broadcast axes).
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.region import step_op


def chain_steps(node) -> list:
    if node.kind == "ElementwiseRegion":
        return [step_op(s) for s in node.attrs.chain]
    arity = len(node.inputs)
    return [(node.kind, node.attrs, [("Input", i) for i in range(arity)])]


def read_mode(shape: tuple, out: tuple, region_attrs=None, i: int = 0) -> tuple:
    """How input i of shape ``shape`` is read for output ``out``: (mode, strides or None);
    a region's own per-input flags (scalar mask, modulus) decide for region inputs."""
    size, n = math.prod(shape), math.prod(out)
    if region_attrs is not None:
        if region_attrs.scalar_input_mask >> i & 1:
            return "scalar", None
        return ("mod", None) if region_attrs.input_modulus[i] else ("full", None)
    if size == n and shape == out or size == n == 1:
        return "full", None
    if size == 1:
        return "scalar", None
    core = tuple(shape)
    while core and core[0] == 1:
        core = core[1:]
    if core and core == tuple(out[len(out) - len(core):]):
        return "mod", None
    view = np.broadcast_to(np.empty(shape, np.int8), out)
    return "strided", np.array(view.strides, np.int64)
