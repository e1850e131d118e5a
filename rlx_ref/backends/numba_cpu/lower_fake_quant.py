"""The fake-quantization kinds (ops/fake_quant) run through their decompositions
(passes/decompose_fake_quant): the pipeline rewrites them into Activation, Binary, Compare,
Where, Reduce, Reshape and Constant nodes, which this backend lowers natively for f32 (the
only dtype the kinds take)."""
from __future__ import annotations

from ...passes.decompose_fake_quant import DTYPES, KINDS, REASON
from .lowering import TABLE

TABLE.decomposed(KINDS, DTYPES, REASON)
