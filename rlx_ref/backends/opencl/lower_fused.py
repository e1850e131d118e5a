"""The fused composites and FKL region kinds (ops/fused, ops/region_batch) run through
their RLX decompositions (passes/unfuse_composites): the pipeline rewrites them into
MatMul, Conv, Binary, LayerNorm/RmsNorm, Attention, Rope, ElementwiseRegion, Concat and the
other primitive kinds this backend lowers."""
from __future__ import annotations

from ...passes.unfuse_composites import CLAIM_DTYPES, REASON
from .lowering import TABLE

for _kind, _dtypes in CLAIM_DTYPES.items():
    TABLE.decomposed((_kind,), _dtypes, REASON)
