"""Targeted cases for numba-cpu's conv, linalg and attention kernel variants.

Each exists because a planted fault (``backends/fault_catalogue/numba_cpu_nn.py``) passed
the samples without it: a channels-last Conv (>= 8 channels per group) whose stride,
padding and dilation differ between H and W, a grouped 1×1 Conv, a float MatMul large
enough for BLAS (M·N·K >= 4096 per batch) with a square rhs, and an Attention with more
(batch, head) tiles than the parallel kernel has chunks (18 against 16) and not a multiple
of them. All are tagged ``power``; the Attention one runs with lowered thresholds.
"""
from __future__ import annotations

import numpy as np

from ..backends.variants import LOWERED_TAG
from .rng import CounterRNG

F32 = np.float32


def _normal(seed: int, kind: str, *shapes) -> list:
    r = CounterRNG(seed, f"power-nn:{kind}")
    return [r.standard_normal(s).astype(F32) for s in shapes]


def _conv(seed: int) -> list:
    from ..ops.conv import ConvAttrs
    from .cases import Spec

    x, w, xg, wg = _normal(seed, "Conv", (1, 8, 6, 7), (4, 8, 3, 3), (2, 4, 3, 3),
                           (6, 2, 1, 1))
    # H and W differ in stride, padding and dilation: an axis mix-up shows
    asym = ConvAttrs((3, 3), (2, 1), (1, 2), (1, 2), 1)
    return [Spec("Conv", asym, (x, w), ("power", "nhwc", "stride", "padding", "dilation"),
                 source="power:nhwc-asymmetric"),
            Spec("Conv", ConvAttrs((1, 1), (1, 1), (0, 0), (1, 1), 2), (xg, wg),
                 ("power", "1x1", "groups"), source="power:grouped-1x1")]


def _matmul(seed: int) -> list:
    from .cases import Spec

    # 24·32·32 multiply-adds per batch take BLAS; a square rhs keeps a transposed one legal
    a, b = _normal(seed, "MatMul", (2, 24, 32), (32, 32))
    return [Spec("MatMul", None, (a, b), ("power", "blas"), source="power:blas-square-rhs")]


def _attention(seed: int) -> list:
    from ..ops.attention import AttentionAttrs
    from .cases import Spec

    q, k, v = _normal(seed, "Attention", (1, 18, 3, 4), (1, 18, 5, 4), (1, 18, 5, 4))
    return [Spec("Attention", AttentionAttrs(18, 4), (q, k, v),
                 ("power", "many-tiles", LOWERED_TAG), source="power:attention-18-tiles")]


BY_KIND = {"Conv": _conv, "MatMul": _matmul, "Attention": _attention}
