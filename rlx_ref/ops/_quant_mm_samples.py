"""Samples of the quant matmuls. Packed GGUF weights come from quantizing random f32
weights with ``rlx_ref.quant.quantize`` (finite scales, valid blocks); GGUF samples exist
for the schemes with a registered quantizer among those listed in ``GGUF_SAMPLED``."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .opdef import Sample
from .quant_matmul import LoraAttrs, SchemeAttrs

GGUF_SAMPLED = ("GgufQ8_0", "GgufQ4_0", "GgufQ4K", "GgufIQ4NL", "GgufMXFP4")
# every other scheme with a quantizer gets one tiled and one GEMV product, so each
# backend's decoder of that scheme is reached by conformance
GGUF_BRIEF = ("GgufQ4_1", "GgufQ5_0", "GgufQ5_1", "GgufQ2K", "GgufQ3K", "GgufQ5K", "GgufQ6K",
              "GgufQ8K", "GgufIQ4XS", "GgufTQ1_0", "GgufTQ2_0")


def _f32(rng, *shape, scale=1.0):
    return (np.asarray(rng.standard_normal(shape)) * scale).astype(np.float32)


def _bytes(rng, n):
    return np.asarray(rng.integers(0, 256, size=n), np.uint8)


def _e4m3(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def gguf_schemes(names=GGUF_SAMPLED):
    """(variant, SchemeDef) of the sampled GGUF schemes that have a quantizer."""
    from ..quant import QuantError, get_scheme

    out = []
    for name in names:
        try:
            sd = get_scheme(name)
        except QuantError:
            continue
        if sd.kind == "gguf" and sd.quantize is not None:
            out.append((name, sd))
    return out


def packed_weight(rng, sd, n: int, k: int, experts: int = 1) -> np.ndarray:
    """A valid packed GGUF weight: random f32 [experts, n, k] quantized block by block."""
    from ..quant import quantize

    return quantize(_f32(rng, experts, n, k), sd.name)


def _out(*dims) -> Shape:
    return Shape(dims, DType.F32)


def _gguf_matmul(rng):
    out = []
    for name, sd in gguf_schemes():
        b = sd.block_size
        for m, k, n, tags in ((3, b, 5, ("one-block",)), (1, 2 * b, 5, ("gemv",)),
                              (3, 2 * b, 1, ("n=1",)), (0, b, 5, ("empty",))):
            x, w = _f32(rng, m, k), packed_weight(rng, sd, n, k)
            out.append(Sample((x, w), SchemeAttrs(name), _out(m, n), tags=(name,) + tags))
    for name, sd in gguf_schemes(GGUF_BRIEF):
        for m, tags in ((3, ("one-block",)), (1, ("gemv",))):
            x, w = _f32(rng, m, sd.block_size), packed_weight(rng, sd, 5, sd.block_size)
            out.append(Sample((x, w), SchemeAttrs(name), _out(m, 5), tags=(name,) + tags))
    return out


def dequant_matmul_samples(rng):
    S = SchemeAttrs
    blk = lambda name, bs: S((name, {"block_size": bs}))  # noqa: E731
    mlx = lambda name, gs, **f: S((name, {**f, "group_size": gs}))  # noqa: E731
    scale = lambda *s: (np.abs(_f32(rng, *s)) * 0.05 + 0.01).astype(np.float32)  # noqa: E731
    i8 = lambda *s: np.asarray(rng.integers(-128, 128, size=s), np.int8)  # noqa: E731
    # Int8Block, block 2: W = q·s = [[0.5, -2], [1, 6]]; x·W = [2.5, 10]
    hand = Sample((np.float32([[1, 2]]), np.int8([[1, -1], [2, 3]]), np.float32([[0.5, 2]]),
                   np.zeros((1, 2), np.float32)), blk("Int8Block", 2), _out(1, 2),
                  tags=("hand", "Int8Block"), expect=np.float32([[2.5, 10]]))
    out = [hand] + _gguf_matmul(rng)
    out += [
        Sample((_f32(rng, 3, 64), i8(64, 5), scale(2, 5), np.zeros((2, 5), np.float32)),
               blk("Int8Block", 32), _out(3, 5), tags=("Int8Block",)),
        Sample((_f32(rng, 1, 40), i8(40, 3), scale(3, 3), _f32(rng, 3, 3, scale=4.0)),
               blk("Int8BlockAsym", 16), _out(1, 3), tags=("Int8BlockAsym", "gemv",
                                                           "partial-block")),
        Sample((_f32(rng, 3, 32), _bytes(rng, 80), scale(1, 5), np.zeros(1, np.float32)),
               blk("Int4Block", 32), _out(3, 5), tags=("Int4Block",)),
        Sample((_f32(rng, 2, 7), _bytes(rng, 11), scale(1, 3), np.zeros(1, np.float32)),
               blk("Int4Block", 16), _out(2, 3), tags=("Int4Block", "odd")),
        Sample((_f32(rng, 3, 16), _e4m3(_f32(rng, 16, 5, scale=8.0)), scale(5),
                np.zeros(1, np.float32)), S("Fp8E4m3"), _out(3, 5), tags=("Fp8E4m3",)),
        Sample((_f32(rng, 1, 16), _bytes(rng, 16 * 3) & 0xFB, scale(3),
                np.zeros(1, np.float32)), S("Fp8E5m2"), _out(1, 3), tags=("Fp8E5m2", "gemv")),
        Sample((_f32(rng, 3, 32), _bytes(rng, 48), _e4m3(np.abs(_f32(rng, 2, 3)) + 0.25),
                np.float32([0.5])), S("Nvfp4Block"), _out(3, 3), tags=("Nvfp4Block",)),
        Sample((_f32(rng, 3, 64), _bytes(rng, 3 * 32), scale(3, 2), _f32(rng, 3, 2)),
               mlx("MlxAffine", 32, bits=4), _out(3, 3), tags=("MlxAffine", "bits=4")),
        Sample((_f32(rng, 1, 32), _bytes(rng, 2 * 12), scale(2, 1), _f32(rng, 2, 1)),
               mlx("MlxAffine", 32, bits=3), _out(1, 2), tags=("MlxAffine", "bits=3", "gemv")),
        Sample((_f32(rng, 2, 32), _bytes(rng, 5 * 24), scale(5, 2), _f32(rng, 5, 2)),
               mlx("MlxAffine", 16, bits=6), _out(2, 5), tags=("MlxAffine", "bits=6")),
        Sample((_f32(rng, 3, 64), _bytes(rng, 3 * 32),
                np.asarray(rng.integers(122, 130, size=(3, 2)), np.uint8),
                np.ones(1, np.float32)), mlx("MlxMxfp4", 32), _out(3, 3),
               tags=("MlxMxfp4", "e8m0")),
        Sample((_f32(rng, 1, 32), _bytes(rng, 5 * 16), _e4m3(np.abs(_f32(rng, 5, 2)) + 0.1),
                np.ones(1, np.float32)), mlx("MlxMxfp4", 16), _out(1, 5),
               tags=("MlxMxfp4", "e4m3-scale", "gemv")),
        Sample((_f32(rng, 2, 32), _e4m3(_f32(rng, 3, 32, scale=4.0)),
                np.asarray(rng.integers(120, 128, size=(3, 1)), np.uint8),
                np.ones(1, np.float32)), mlx("MlxMxfp8", 32), _out(2, 3), tags=("MlxMxfp8",)),
        Sample((np.zeros((0, 32), np.float32), i8(32, 5), scale(1, 5), np.zeros(1, np.float32)),
               blk("Int8Block", 32), _out(0, 5), tags=("empty", "Int8Block")),
    ]
    return out


def _ids(*v):
    return np.float32(v)


def grouped_samples(rng):
    # expert 1 doubles, expert 0 negates: rows 0 and 2 use expert 1, row 1 expert 0
    hand_w = np.stack([-np.eye(2, dtype=np.float32), 2 * np.eye(2, dtype=np.float32)])
    return [
        Sample((np.float32([[1, 2], [3, 4], [5, 6]]), hand_w, _ids(1, 0, 1.9)),
               tags=("hand", "repeated-expert", "truncated-id"),
               expect=np.float32([[2, 4], [-3, -4], [10, 12]])),
        Sample((_f32(rng, 5, 7), _f32(rng, 4, 7, 3), _ids(3, 3, 0, 3, 1)),
               tags=("prime-length", "unused-expert", "repeated-expert")),
        Sample((_f32(rng, 1, 8), _f32(rng, 3, 8, 5), _ids(2)), tags=("gemv", "unused-expert")),
        Sample((np.zeros((0, 4), np.float32), _f32(rng, 2, 4, 3), np.zeros(0, np.float32)),
               tags=("empty",)),
    ]


def dequant_grouped_samples(rng):
    out = []
    for name, sd in gguf_schemes():
        b = sd.block_size
        for m, k, n, e, ids, tags in ((3, b, 5, 3, (2, 0, 2), ("repeated-expert",)),
                                      (1, 2 * b, 1, 2, (1,), ("gemv", "unused-expert")),
                                      (0, b, 5, 2, (), ("empty",))):
            w = packed_weight(rng, sd, n, k, experts=e)
            out.append(Sample((_f32(rng, m, k), w, _ids(*ids)), SchemeAttrs(name), _out(m, n),
                              tags=(name,) + tags))
    return out


def moe_weights_samples(rng):
    out = []
    for name, sd in gguf_schemes():
        b = sd.block_size
        for e, k, n, tags in ((2, b, 3, ()), (1, 2 * b, 1, ("n=1",))):
            out.append(Sample((packed_weight(rng, sd, n, k, experts=e),), SchemeAttrs(name),
                              _out(e, k, n), tags=(name,) + tags))
    return out


def lora_samples(rng):
    L = LoraAttrs
    one = np.ones((1, 1), np.float32)
    return [
        # x·W + 0.5·(x·A)·B = [1·2 + 0.5·(1·3)·4] = [8]
        Sample((one, 2 * one, 3 * one, 4 * one), L(0.5), tags=("hand",),
               expect=np.float32([[8]])),
        Sample((_f32(rng, 3, 5), _f32(rng, 5, 7), _f32(rng, 5, 2), _f32(rng, 2, 7)), L(2.0),
               tags=("prime-length",)),
        Sample((_f32(rng, 2, 3, 4), _f32(rng, 4, 5), _f32(rng, 4, 1), _f32(rng, 1, 5)),
               L(-0.25), tags=("rank-3", "rank-1-adapter")),
        Sample((_f32(rng, 1, 6), _f32(rng, 6, 3), _f32(rng, 6, 2), _f32(rng, 2, 3)), L(1.0),
               tags=("gemv", "scale=1")),
        Sample((np.zeros((0, 4), np.float32), _f32(rng, 4, 3), _f32(rng, 4, 2),
                _f32(rng, 2, 3)), L(0.5), tags=("empty",)),
    ]
