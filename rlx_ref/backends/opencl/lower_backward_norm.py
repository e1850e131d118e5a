"""The activation and normalization backward kinds (ops/backward_activation,
ops/backward_norm) run through their decompositions (passes/decompose_backward_norm): the
pipeline rewrites them into Binary, Activation, Compare, Where, Reduce, Reshape and Cast
nodes, which this backend lowers natively for every float dtype the kinds take (the
products are f32/f64; f16/bf16 operands are only cast)."""
from __future__ import annotations

from ...passes.decompose_backward_norm import FLOAT_DTYPES, KINDS, REASON
from .lowering import TABLE

TABLE.decomposed(KINDS, FLOAT_DTYPES, REASON)
