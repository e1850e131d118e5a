"""Samples of the integer quant ops (Quantize, Dequantize, QMatMul, QConv2d)."""
from __future__ import annotations

import numpy as np

from .opdef import Sample
from .quant import QConv2dAttrs, QMatMulAttrs, QuantAxisAttrs

A = QuantAxisAttrs


def _i8(rng, *shape):
    return np.asarray(rng.integers(-128, 128, size=shape), np.int8)


def _f32(rng, *shape, scale=1.0):
    return (np.asarray(rng.standard_normal(shape)) * scale).astype(np.float32)


def quantize_samples(rng):
    special = np.float32([0.25, 0.75, -0.25, -0.75, 1.0, 63.9, -64.3, np.nan, np.inf, -np.inf])
    return [
        # x/0.5: 0.5, 1.5, -0.5, -1.5 (ties go away from zero), 2, 127.8, -128.6, NaN, ±inf
        Sample((special,), A(None, (0.5,), (0,)), tags=("hand", "ties", "saturation", "nan"),
               expect=np.int8([1, 2, -1, -2, 2, 127, -128, 0, 127, -128])),
        Sample((_f32(rng, 2, 3, scale=4.0),), A(1, (0.1, 0.25, 0.5), (0, 5, -3)),
               tags=("per-channel",)),
        Sample((_f32(rng, 3, 2, 2, scale=2.0),), A(0, (0.05, 0.5, 2.0), (-128, 127, 0)),
               tags=("per-channel", "zero-point-extreme", "saturation")),
        Sample((_f32(rng, 5, 7, scale=30.0),), A(None, (0.3,), (7,)),
               tags=("prime-length",)),
        Sample((np.float32(1.3),), A(None, (0.1,), (-2,)), tags=("0-d",),
               expect=np.int8(11)),
        Sample((np.zeros((0, 4), np.float32),), A(1, (1.0, 2.0, 3.0, 4.0), (0, 0, 0, 0)),
               tags=("empty",)),
        Sample((_f32(rng, 4, 1),), A(1, (0.01,), (3,)), tags=("size-1", "per-channel")),
    ]


def dequantize_samples(rng):
    return [
        # (q + 128) · 0.5
        Sample((np.int8([-128, -1, 0, 1, 127]),), A(None, (0.5,), (-128,)), tags=("hand",),
               expect=np.float32([0, 63.5, 64, 64.5, 127.5])),
        Sample((_i8(rng, 3, 4),), A(0, (0.1, 0.02, 3.0), (0, -7, 12)),
               tags=("per-channel",)),
        Sample((_i8(rng, 2, 3, 5),), A(2, (1.0, 0.5, 0.25, 0.125, 0.1), (127, -128, 0, 1, -1)),
               tags=("per-channel", "zero-point-extreme", "prime-length")),
        Sample((_i8(rng, 6),), A(None, (1e-3,), (2**31 - 1,)), tags=("zero-point-extreme",)),
        Sample((np.int8(-3),), A(None, (0.25,), (1,)), tags=("0-d",), expect=np.float32(-1.0)),
        Sample((np.zeros((2, 0), np.int8),), A(0, (1.0, 2.0), (0, 0)), tags=("empty",)),
    ]


def qmatmul_samples(rng):
    Q = QMatMulAttrs
    hx, hw = np.int8([[1, 2], [3, -4]]), np.int8([[1, 0, -1], [2, 1, 1]])
    big = np.full((2, 4), 127, np.int8)
    return [
        # acc = x@w + bias = [[5, 12, -4], [-5, 6, -12]]; ·0.5 -> ±2.5 ties round away
        Sample((hx, hw, np.int32([0, 10, -5])), Q(0, 0, 0, 0.5), tags=("hand", "ties"),
               expect=np.int8([[3, 6, -2], [-3, 3, -6]])),
        # acc = ±4·127² = ±64516; ·0.01 -> ±645 saturates; out_zp -10 shifts before the clamp
        Sample((big, np.int8([[127, -127]] * 4), np.int32([0, 0])), Q(0, 0, -10, 0.01),
               tags=("saturation", "hand"), expect=np.int8([[127, -128], [127, -128]])),
        Sample((_i8(rng, 3, 5), _i8(rng, 5, 5), np.asarray(rng.integers(-500, 500, size=5),
                np.int32)), Q(-128, 127, 100, 1.5e-4), tags=("zero-point-extreme", "odd")),
        Sample((_i8(rng, 1, 7), _i8(rng, 7, 3), np.int32([1, -2, 3])), Q(3, -2, 0, 2e-3),
               tags=("gemv", "prime-length")),
        Sample((np.zeros((0, 4), np.int8), _i8(rng, 4, 5), np.zeros(5, np.int32)),
               Q(0, 0, 0, 1.0), tags=("empty",)),
        Sample((np.zeros((2, 0), np.int8), np.zeros((0, 3), np.int8), np.int32([5, -6, 300])),
               Q(0, 0, 1, 0.5), tags=("empty", "K=0", "hand"),
               expect=np.int8([[4, -2, 127], [4, -2, 127]])),
    ]


def qconv_samples(rng):
    C = QConv2dAttrs
    x = np.arange(1, 10, dtype=np.int8).reshape(1, 1, 3, 3)
    ones = np.ones((1, 1, 2, 2), np.int8)
    return [
        # 2x2 window sums [[12, 16], [24, 28]] · 0.25
        Sample((x, ones, np.int32([0])), C((2, 2), mult=0.25), tags=("hand",),
               expect=np.int8([[[[3, 4], [6, 7]]]])),
        # padding 1 with x_zp 1: corner taps outside add nothing; (x - 1) sums, +2 bias
        Sample((x, ones, np.int32([2])), C((2, 2), (2, 2), (1, 1), x_zp=1),
               tags=("hand", "padding", "zero-point"),
               expect=np.int8([[[[2, 5], [11, 26]]]])),
        Sample((_i8(rng, 2, 4, 5, 5), _i8(rng, 6, 2, 3, 3), np.asarray(
                rng.integers(-1000, 1000, size=6), np.int32)),
               C((3, 3), (2, 1), (1, 0), (1, 2), 2, -5, 3, 7, 1e-3),
               tags=("groups", "stride", "dilation", "odd")),
        Sample((_i8(rng, 1, 3, 4, 4), _i8(rng, 2, 3, 1, 1), np.int32([0, 0])),
               C((1, 1), mult=0.5), tags=("saturation", "1x1")),
    ]
