"""GGUF's legacy 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.

Every block is little-endian: an f16 scale ``d`` (and for the ``_1`` kinds an f16 minimum
``m``), for the 5-bit kinds a 32-bit plane of high bits, then the quants. Decoding is
vectorized over ``[n, block_bytes]`` uint8 blocks and does the same f32 operations, in the
same order, as gguf-py's decoder, so results agree bit for bit (signed zeros included).

The quantizers follow llama.cpp's reference (``quantize_row_q*_ref``) step for step in f32:
the scale comes from the element of largest magnitude (the first one on ties) or from the
block's min and max, the f32 scale is rounded to f16 to nearest-even, and codes are
truncated after adding the offset plus one half (Q8_0 rounds half away from zero).
"""
from __future__ import annotations

import numpy as np

from ._blockfields import quiet as quiet_decode
from .scheme import QuantError, SchemeDef, register

QK = 32
_F0 = np.float32(0.0)
_F1 = np.float32(1.0)


# ---- helpers shared with the K-quant modules ---------------------------------------------

def check_blocks(name: str, blocks, block_bytes: int) -> np.ndarray:
    """``blocks`` as a C-contiguous uint8 ``[n, block_bytes]`` array, or a QuantError."""
    b = np.asarray(blocks)
    if b.dtype != np.uint8:
        raise QuantError(f"{name}: blocks must be uint8, got dtype {b.dtype}")
    if b.ndim != 2 or b.shape[1] != block_bytes:
        raise QuantError(f"{name}: blocks must have shape [n, {block_bytes}], got "
                         f"{list(b.shape)}")
    return np.ascontiguousarray(b)


def check_values(name: str, x, block_size: int) -> np.ndarray:
    """``x`` as a C-contiguous float32 ``[n, block_size]`` array, or a QuantError."""
    v = np.asarray(x)
    if v.ndim != 2 or v.shape[1] != block_size:
        raise QuantError(f"{name}: values must have shape [n, {block_size}], got "
                         f"{list(v.shape)}")
    return np.ascontiguousarray(v, dtype=np.float32)


def f16_field(blocks: np.ndarray, off: int) -> np.ndarray:
    """The little-endian f16 at byte ``off`` of every block, widened to f32 ``[n, 1]``."""
    raw = np.ascontiguousarray(blocks[:, off:off + 2])
    return raw.view("<f2").astype(np.float32)


def f16_bytes(v: np.ndarray) -> np.ndarray:
    """f32 ``[n, 1]`` rounded to f16 (nearest-even, as ggml) as ``[n, 2]`` bytes."""
    return np.asarray(v, dtype=np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)


def quiet(fn):
    """Run a quantizer with float warnings off: overflow and 0*inf are part of the spec."""
    def run(x):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return fn(x)
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def inverse(d: np.ndarray) -> np.ndarray:
    """``1/d`` where d != 0, else 0 (llama.cpp's ``d ? 1.0f/d : 0.0f``)."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d == 0, _F0, _F1 / np.where(d == 0, _F1, d)).astype(np.float32)


def signed_absmax(x: np.ndarray) -> np.ndarray:
    """Per row, the value of largest magnitude, the first on ties; ``[n, 1]``."""
    i = np.abs(x).argmax(axis=1)[:, None]
    return np.take_along_axis(x, i, axis=1)


def trunc_code(v: np.ndarray, hi: int) -> np.ndarray:
    """C's ``MIN(hi, (int)v)`` for codes; a non-finite ``v`` (only when ``1/d`` overflowed,
    where the reference's float-to-int cast is undefined) gives code 0, as x86 does."""
    with np.errstate(invalid="ignore"):
        t = np.where(np.isfinite(v), np.trunc(v), _F0)
    return np.clip(t, 0, hi).astype(np.uint8)


def round_away(v: np.ndarray) -> np.ndarray:
    """C's ``roundf`` (half away from zero), exact in f32; non-finite gives 0."""
    with np.errstate(invalid="ignore"):
        a = np.abs(v)
        fl = np.floor(a)
        r = fl + (a - fl >= 0.5)
        return np.where(np.isfinite(v), np.copysign(r, v), _F0)


def split_nibbles(qs: np.ndarray) -> np.ndarray:
    """``[n, 16]`` bytes -> ``[n, 32]`` codes: low nibbles are elements 0..15, high 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def join_nibbles(q: np.ndarray) -> np.ndarray:
    """Inverse of ``split_nibbles`` for codes of at most 4 bits (higher bits are dropped)."""
    h = q.shape[1] // 2
    return ((q[:, :h] & 0x0F) | (q[:, h:] << 4)).astype(np.uint8)


def _high_bits(qh: np.ndarray) -> np.ndarray:
    """The 32-bit high plane ``[n, 4]`` -> bit j of element j, ``[n, 32]`` uint8."""
    return np.unpackbits(qh, axis=1, bitorder="little")


def _pack_high(q: np.ndarray) -> np.ndarray:
    return np.packbits((q >> 4) & 1, axis=1, bitorder="little")


# ---- Q4_0: d, 16 bytes of nibbles; w = d * (q - 8) ----------------------------------------

@quiet_decode
def dequant_q4_0(blocks):
    b = check_blocks("Q4_0", blocks, 18)
    q = split_nibbles(b[:, 2:]).astype(np.int8) - np.int8(8)
    return f16_field(b, 0) * q.astype(np.float32)


@quiet
def quant_q4_0(x):
    x = check_values("Q4_0", x, QK)
    d = signed_absmax(x) / np.float32(-8)
    q = trunc_code(x * inverse(d) + np.float32(8.5), 15)
    return np.concatenate([f16_bytes(d), join_nibbles(q)], axis=1)


# ---- Q4_1: d, m, 16 bytes of nibbles; w = d * q + m --------------------------------------

@quiet_decode
def dequant_q4_1(blocks):
    b = check_blocks("Q4_1", blocks, 20)
    q = split_nibbles(b[:, 4:]).astype(np.float32)
    return f16_field(b, 0) * q + f16_field(b, 2)


@quiet
def quant_q4_1(x):
    x = check_values("Q4_1", x, QK)
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = (hi - lo) / np.float32(15)
    q = trunc_code((x - lo) * inverse(d) + np.float32(0.5), 15)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), join_nibbles(q)], axis=1)


# ---- Q5_0: d, 32 high bits, 16 bytes of nibbles; w = d * (q - 16) ------------------------

@quiet_decode
def dequant_q5_0(blocks):
    b = check_blocks("Q5_0", blocks, 22)
    q = split_nibbles(b[:, 6:]) | (_high_bits(b[:, 2:6]) << 4)
    return f16_field(b, 0) * (q.astype(np.int8) - np.int8(16)).astype(np.float32)


@quiet
def quant_q5_0(x):
    x = check_values("Q5_0", x, QK)
    d = signed_absmax(x) / np.float32(-16)
    q = trunc_code(x * inverse(d) + np.float32(16.5), 31)
    return np.concatenate([f16_bytes(d), _pack_high(q), join_nibbles(q)], axis=1)


# ---- Q5_1: d, m, 32 high bits, 16 bytes of nibbles; w = d * q + m ------------------------

@quiet_decode
def dequant_q5_1(blocks):
    b = check_blocks("Q5_1", blocks, 24)
    q = split_nibbles(b[:, 8:]) | (_high_bits(b[:, 4:8]) << 4)
    return f16_field(b, 0) * q.astype(np.float32) + f16_field(b, 2)


@quiet
def quant_q5_1(x):
    x = check_values("Q5_1", x, QK)
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = (hi - lo) / np.float32(31)
    q = trunc_code((x - lo) * inverse(d) + np.float32(0.5), 31)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), _pack_high(q), join_nibbles(q)],
                          axis=1)


# ---- Q8_0: d, 32 signed bytes; w = d * q -------------------------------------------------

@quiet_decode
def dequant_q8_0(blocks):
    b = check_blocks("Q8_0", blocks, 34)
    return f16_field(b, 0) * b[:, 2:].view(np.int8).astype(np.float32)


@quiet
def quant_q8_0(x):
    x = check_values("Q8_0", x, QK)
    d = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    q = round_away(x * inverse(d)).astype(np.int8)
    return np.concatenate([f16_bytes(d), q.view(np.uint8)], axis=1)


_NIBBLES = "qs[16]   u8    element j in the low nibble of byte j, element j+16 in the high"
_QH = "qh[4]    u32   bit j is bit 4 of element j's code"

register(SchemeDef(
    name="Q4_0", block_size=QK, block_bytes=18, dequantize=dequant_q4_0,
    quantize=quant_q4_0, rlx="GgufQ4_0", ggml_type=2, gpu_id=19, quantize_source="gguf-py",
    layout="d        f16   scale\n" + _NIBBLES,
    doc="Symmetric 4-bit: w = d * (q - 8), q in 0..15. The quantizer takes the element of "
        "largest magnitude, max (first on ties), sets d = max / -8 (so max encodes as code "
        "0), and q = min(15, trunc(x/d + 8.5)); an all-zero block stores d = -0 (0 / -8) "
        "and codes 8.",
))
register(SchemeDef(
    name="Q4_1", block_size=QK, block_bytes=20, dequantize=dequant_q4_1,
    quantize=quant_q4_1, rlx="GgufQ4_1", ggml_type=3, gpu_id=21, quantize_source="gguf-py",
    layout="d        f16   scale\nm        f16   block minimum\n" + _NIBBLES,
    doc="Asymmetric 4-bit: w = d * q + m, q in 0..15. The quantizer sets m = min, "
        "d = (max - min) / 15 and q = min(15, trunc((x - min)/d + 0.5)); a constant block "
        "has d = 0, codes 0 and m = its value (rounded to f16).",
))
register(SchemeDef(
    name="Q5_0", block_size=QK, block_bytes=22, dequantize=dequant_q5_0,
    quantize=quant_q5_0, rlx="GgufQ5_0", ggml_type=6, gpu_id=22, quantize_source="gguf-py",
    layout="d        f16   scale\n" + _QH + "\n" + _NIBBLES + " (low 4 bits)",
    doc="Symmetric 5-bit: w = d * (q - 16), q in 0..31. As Q4_0 with d = max / -16 and "
        "q = min(31, trunc(x/d + 16.5)); bit 4 of each code lives in the 32-bit plane qh. A "
        "scale of 0 gives 1/d = 0 (and a subnormal f32 scale, whose inverse overflows, "
        "codes 0, as the reference on x86).",
))
register(SchemeDef(
    name="Q5_1", block_size=QK, block_bytes=24, dequantize=dequant_q5_1,
    quantize=quant_q5_1, rlx="GgufQ5_1", ggml_type=7, gpu_id=23, quantize_source="gguf-py",
    layout="d        f16   scale\nm        f16   block minimum\n" + _QH + "\n" + _NIBBLES
           + " (low 4 bits)",
    doc="Asymmetric 5-bit: w = d * q + m, q in 0..31. As Q4_1 with d = (max - min) / 31; "
        "bit 4 of each code lives in the 32-bit plane qh.",
))
register(SchemeDef(
    name="Q8_0", block_size=QK, block_bytes=34, dequantize=dequant_q8_0,
    quantize=quant_q8_0, rlx="GgufQ8_0", ggml_type=8, gpu_id=20, quantize_source="gguf-py",
    layout="d        f16   scale\nqs[32]   i8    element j",
    doc="Symmetric 8-bit: w = d * q, q in -127..127. The quantizer sets d = max|x| / 127 "
        "and q = roundf(x/d), rounding half away from zero; an all-zero block has d = 0.",
))
