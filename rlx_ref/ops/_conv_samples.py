"""Samples of the conv family: small inputs plus edge cases, a few with hand-computed outputs."""
from __future__ import annotations

import numpy as np

from .conv import ConvAttrs, ConvTransposeAttrs, Im2ColAttrs, PoolAttrs
from .opdef import Sample

def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def conv_samples(rng):
    A = ConvAttrs
    x9 = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    special = _f32(rng, 1, 1, 3, 3)
    special[0, 0, 1, 1], special[0, 0, 0, 2] = np.nan, np.inf
    return [
        Sample((x9, np.ones((1, 1, 2, 2), np.float32)), A((2, 2)), tags=("hand",),
               expect=np.array([[[[8, 12], [20, 24]]]], np.float32)),
        Sample((_f32(rng, 1, 2, 5, 5), _f32(rng, 3, 2, 3, 3)), A((3, 3), (1, 1), (1, 1)),
               tags=("same-padding",)),
        Sample((_f32(rng, 2, 3, 7, 7), _f32(rng, 4, 3, 3, 2)), A((3, 2), (2, 3), (1, 2), (2, 1)),
               tags=("prime-length", "odd", "stride", "dilation")),
        Sample((_f32(rng, 1, 4, 5, 6), _f32(rng, 6, 2, 3, 3)),
               A((3, 3), (1, 1), (1, 1), (1, 1), 2), tags=("groups",)),
        Sample((_f32(rng, 1, 3, 4, 4), _f32(rng, 3, 1, 2, 2)), A((2, 2), groups=3),
               tags=("depthwise",)),
        Sample((_f32(rng, 2, 3, 7), _f32(rng, 4, 3, 3)), A((1, 3), (1, 2), (0, 1)),
               tags=("rank-3", "1-d")),
        Sample((_f32(rng, 1, 3, 2, 3), _f32(rng, 5, 3, 1, 1)), A((1, 1)), tags=("1x1",)),
        Sample((_f32(rng, 1, 2, 3, 3), _f32(rng, 2, 2, 3, 3)), A((3, 3)), tags=("size-1",)),
        Sample((_f32(rng, 1, 2, 4, 5), _f32(rng, 2, 2, 2, 2)), A((2, 2), (2,), ()),
               tags=("defaults",)),
        Sample((np.zeros((0, 2, 4, 4), np.float32), _f32(rng, 3, 2, 3, 3)), A((3, 3)),
               tags=("empty",)),
        Sample((special, np.ones((1, 1, 2, 2), np.float32)), A((2, 2)), tags=("nan", "inf")),
        Sample((rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((2, 2, 3, 3))),
               A((3, 3), padding=(1, 1)), tags=("f64",)),
        Sample((_f32(rng, 1, 2, 4, 4).astype(np.float16),
                _f32(rng, 2, 2, 3, 3).astype(np.float16)), A((3, 3)), tags=("f16",)),
    ]


def conv_t_samples(rng):
    A = ConvTransposeAttrs
    x4 = np.array([[[[1, 2], [3, 4]]]], np.float32)
    blocks = np.kron(x4[0, 0], np.ones((2, 2), np.float32))[None, None]
    return [
        Sample((x4, np.ones((1, 1, 2, 2), np.float32)), A((2, 2), (2, 2)), tags=("hand",),
               expect=blocks),
        Sample((_f32(rng, 1, 2, 3, 3), _f32(rng, 2, 3, 4, 4)), A((4, 4), (2, 2), (1, 1)),
               tags=("upsample",)),
        Sample((_f32(rng, 2, 3, 3, 5), _f32(rng, 3, 2, 3, 2)),
               A((3, 2), (2, 3), (1, 0), (2, 1), (1, 2)),
               tags=("prime-length", "odd", "output_padding", "dilation")),
        Sample((_f32(rng, 1, 4, 3, 3), _f32(rng, 4, 3, 3, 3)), A((3, 3), (1, 1), (1, 1),
                                                               groups=2), tags=("groups",)),
        Sample((_f32(rng, 2, 3, 5), _f32(rng, 3, 2, 3)), A((1, 3), (1, 2), (0, 1)),
               tags=("rank-3", "1-d")),
        Sample((_f32(rng, 1, 2, 1, 1), _f32(rng, 2, 3, 1, 1)), A((1, 1)), tags=("size-1",)),
        Sample((np.zeros((0, 2, 2, 2), np.float32), _f32(rng, 2, 2, 3, 3)), A((3, 3)),
               tags=("empty",)),
        Sample((rng.standard_normal((1, 2, 3, 3)), rng.standard_normal((2, 2, 2, 2))),
               A((2, 2), (2, 2)), tags=("f64",)),
        Sample((_f32(rng, 1, 1, 3, 3).astype(np.float16), _f32(rng, 1, 2, 2, 2)
                .astype(np.float16)), A((2, 2)), tags=("f16",)),
    ]


def pool_samples(rng):
    A = PoolAttrs
    x16 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x9 = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    special = _f32(rng, 1, 2, 4, 4)
    special[0, 0, 0, 0], special[0, 1, 2, 3] = np.nan, -np.inf
    ties = np.array([[[[1, 1], [1, 0]]]], np.float32)
    out = [
        Sample((x16,), A("Max", (2, 2), (2, 2)), tags=("hand",),
               expect=np.array([[[[5, 7], [13, 15]]]], np.float32)),
        # 3x3 window, padding 1, stride 2 on 1..9: padding counts in Mean (÷9 always)
        Sample((x9,), A("Mean", (3, 3), (2, 2), (1, 1)), tags=("hand", "padding"),
               expect=np.array([[[[12, 16], [24, 28]]]], np.float32) / 9),
        Sample((x9,), A("Max", (3, 3), (2, 2), (1, 1)), tags=("hand", "padding"),
               expect=np.array([[[[5, 6], [8, 9]]]], np.float32)),
        Sample((-x9,), A("Max", (2, 2), (1, 1), (1, 1)), tags=("padding", "negative")),
        Sample((special,), A("Max", (2, 2), (2, 2)), tags=("nan", "inf")),
        Sample((ties,), A("Max", (2, 2)), tags=("ties",)),
        Sample((_f32(rng, 2, 3, 7, 5),), A("Mean", (3, 2), (2, 3), (1, 1)),
               tags=("prime-length", "odd")),
        Sample((_f32(rng, 1, 2, 5, 5),), A("Max", (2, 2)), tags=("defaults",)),
        Sample((_f32(rng, 1, 2, 3, 4, 5),), A("Max", (2, 2, 3), (1, 2, 2), (1, 0, 1)),
               tags=("3-d",)),
        Sample((_f32(rng, 1, 1, 4, 4, 4),), A("Mean", (2, 2, 2), (2, 2, 2), (1, 1, 1)),
               tags=("3-d", "padding")),
        Sample((np.zeros((0, 2, 4, 4), np.float32),), A("Max", (2, 2), (2, 2)),
               tags=("empty",)),
        Sample((_f32(rng, 1, 1, 3, 3),), A("Mean", (3, 3)), tags=("size-1",)),
        Sample((rng.standard_normal((1, 2, 5, 5)),), A("Mean", (2, 2), (2, 2), (1, 1)),
               tags=("f64",)),
        Sample((_f32(rng, 1, 2, 4, 4).astype(np.float16),), A("Max", (2, 2), (2, 2)),
               tags=("f16",)),
    ]
    for kind in ("Sum", "Min", "Prod"):
        out.append(Sample((_f32(rng, 1, 2, 4, 5),), A(kind, (2, 3), (2, 1), (1, 1)),
                          tags=("padding",)))
    return out


def im2col_samples(rng):
    A = Im2ColAttrs
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    return [
        Sample((x,), A((2, 2)), tags=("hand",),
               expect=np.array([[0, 1, 3, 4], [1, 2, 4, 5], [3, 4, 6, 7], [4, 5, 7, 8]],
                               np.float32)),
        Sample((_f32(rng, 2, 3, 5, 5),), A((3, 3), (1, 1), (1, 1)), tags=("padding",)),
        Sample((_f32(rng, 1, 2, 7, 5),), A((3, 2), (2, 1), (1, 0), (2, 2)),
               tags=("prime-length", "dilation", "stride")),
        Sample((_f32(rng, 1, 2, 4, 4),), A((2, 2), (2,), ()), tags=("defaults",)),
        Sample((np.zeros((0, 2, 3, 3), np.float32),), A((2, 2)), tags=("empty",)),
        Sample((_f32(rng, 1, 1, 2, 2),), A((2, 2)), tags=("size-1",)),
        Sample((rng.standard_normal((1, 2, 3, 3)),), A((2, 2), padding=(1, 1)), tags=("f64",)),
        Sample((_f32(rng, 1, 2, 3, 3).astype(np.float16),), A((2, 2)), tags=("f16",)),
    ]
