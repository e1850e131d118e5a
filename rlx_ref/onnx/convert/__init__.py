"""The converter tables: one function per ONNX op_type, registered with ``@converts``.

A converter gets ``(ctx, node, ins, attrs)`` and returns one entry per ONNX output: an
RLX node id, or a numpy array when the value is static (shapes, sizes). It reads every
attribute it honours through ``attrs``; an attribute left unread is reported as
unsupported, so a new ONNX attribute can never be ignored silently.
"""
from __future__ import annotations

CONVERTERS: dict = {}

# Ops evaluated at import time (with ONNX's reference) when every operand is static:
# the shape arithmetic of exported models (Shape → Gather → Concat → Reshape).
FOLDABLE = frozenset({
    "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Equal", "Less", "Greater", "Not",
    "And", "Or", "Where", "Cast", "CastLike", "Concat", "Gather", "Unsqueeze", "Squeeze",
    "Slice", "Reshape", "Range", "ConstantOfShape", "Identity", "Min", "Max", "ReduceProd",
    "ReduceSum", "Sqrt", "Expand", "Floor", "Ceil", "Shape", "Size", "Transpose", "Flatten",
    "LessOrEqual", "GreaterOrEqual", "Sign", "Reciprocal", "Tile", "Pow",
})


def converts(*op_types):
    """Register the decorated function as the converter of ``op_types``."""
    def deco(fn):
        for t in op_types:
            if t in CONVERTERS:
                raise ValueError(f"ONNX op {t} has two converters")
            CONVERTERS[t] = fn
        return fn
    return deco


from . import (  # noqa: E402,F401
    attention, bitcast, col2im, control, conv_transpose, deform_conv, elementwise,
    grid_sample, loss, movement, nn, normalization, quant, recurrent, reduce, resize,
    roi_align, select, spectral, transformer, unpool,
)
