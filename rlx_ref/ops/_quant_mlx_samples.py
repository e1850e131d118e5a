"""Samples of DequantGroupedMatMulMlx: MlxAffine at several widths, MlxMxfp4, bf16 scales,
clamped expert ids and a hand-computed product."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .opdef import Sample
from .quant_matmul import SchemeAttrs

_F = np.float32


def _out(m, n):
    return Shape((m, n), DType.F32)


def _scheme(name, gs, **f):
    return SchemeAttrs((name, {**f, "group_size": gs}))


def _case(rng, scheme, m, k, n, e, bits, ids=None, bf16=False, tags=()):
    x = rng.standard_normal((m, k)).astype(_F)
    codes = np.asarray(rng.integers(0, 256, size=e * n * k * bits // 8), np.uint8)
    groups = k // dict(scheme.scheme[1])["group_size"]
    sc = (np.abs(rng.standard_normal((e, n, groups))) * 0.1 + 0.01).astype(_F)
    bi = (rng.standard_normal((e, n, groups)) * 0.1).astype(_F)
    if bf16:
        sc, bi = sc.astype(ml_dtypes.bfloat16), bi.astype(ml_dtypes.bfloat16)
    idx = (rng.integers(0, e, size=m) if ids is None else np.asarray(ids)).astype(_F)
    return Sample((x, codes, sc, bi, idx), scheme, _out(m, n), tags=tags)


def samples(rng):
    # MlxAffine bits 4, group 8, K 8, N 1, two experts; expert 1 has codes 0..7 (bytes
    # 0x10, 0x32, 0x54, 0x76), scale 0.5, bias 1: W = [1, 1.5, ..., 4.5]; x = ones gives 22
    hand_codes = np.array([0, 0, 0, 0, 0x10, 0x32, 0x54, 0x76], np.uint8)
    hand = Sample((np.ones((2, 8), _F), hand_codes, np.full((2, 1, 1), 0.5, _F),
                   np.ones((2, 1, 1), _F), np.array([1, 0], _F)),
                  _scheme("MlxAffine", 8, bits=4), _out(2, 1), tags=("hand", "MlxAffine"),
                  expect=np.array([[22.0], [8.0]], _F))
    aff = lambda bits, gs: _scheme("MlxAffine", gs, bits=bits)  # noqa: E731
    return [
        hand,
        _case(rng, aff(4, 32), 4, 64, 3, 3, 4, tags=("MlxAffine", "bits=4")),
        _case(rng, aff(2, 16), 3, 32, 2, 2, 2, tags=("MlxAffine", "bits=2")),
        _case(rng, aff(3, 32), 2, 32, 3, 2, 3, tags=("MlxAffine", "bits=3")),
        _case(rng, aff(8, 16), 3, 32, 2, 3, 8, bf16=True, tags=("MlxAffine", "bf16-scales")),
        _case(rng, _scheme("MlxMxfp4", 32), 3, 64, 3, 2, 4, tags=("MlxMxfp4",)),
        # ids out of range, negative, fractional and NaN clamp as RLX's `as usize`.min(E-1)
        _case(rng, aff(4, 16), 5, 16, 2, 2, 4, ids=[7.0, -3.0, 1.9, np.nan, 0.5],
              tags=("MlxAffine", "clamped-ids")),
        _case(rng, aff(4, 16), 0, 16, 2, 2, 4, tags=("MlxAffine", "empty")),
    ]
