"""CUDA device decoders of the GGUF block formats, one per scheme, bit-exact with
``rlx_ref.quant.dequant``.

``_dq_<scheme>(w, base, s, dst, d0, col)`` decodes sub-block ``s`` (``SUB`` consecutive
elements, ``DECODERS`` gives each scheme's) of the block starting at byte ``base`` of the
u8 array ``w`` into ``dst[d0 + i, col]``: a register tile of a GEMV, a shared-memory tile
of the tiled product, or the dequantized output itself. Fields are read byte by byte with
integer operations (f16 and f32 scales included, so a scale decodes to its exact f32
value on every device) and every weight is formed with the f32 operations of the scheme's
numpy decoder, in its order. Where a product is followed by an add (``d·q + m``), the
product is exact (an 11-bit f16 times a code of at most 6 bits), so a fused multiply-add
gives the same bits. Block sizes and byte counts come from the scheme records; ``SUB`` is
how a decoder walks its block, and always divides the record's block size.
"""
# ruff: noqa: PLR0124
import numpy as np
from numba import cuda

from ...quant._iq4_quant import KVALUES
from .device import kernel_math, simulator_active

math = kernel_math()
_DJ = {"device": True} if simulator_active() else {"device": True, "forceinline": True}

_IQ4 = KVALUES.astype(np.float32)
# E2M1 values doubled (ggml's kvalues_mxfp4), paired with half-size scales below
_E2M1X2 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)
_P2M24 = np.float32(2.0 ** -24)
_P2M25 = np.float32(2.0 ** -25)
_P2M149 = np.float32(2.0 ** -149)
_P2M10 = np.float32(2.0 ** -10)


@cuda.jit(**_DJ)
def _b(w, at):
    return np.int32(w[at])


@cuda.jit(**_DJ)
def _i8(v):
    # a byte's value as a signed 8-bit integer
    return ((np.int32(v) + 128) & 255) - 128


@cuda.jit(**_DJ)
def _f16(w, at):
    # the little-endian f16 at byte ``at``: its exact f32 value from the integer fields
    h = _b(w, at) | (_b(w, at + 1) << 8)
    e = (h >> 10) & 31
    m = h & 1023
    if e == 0:
        v = np.float32(m) * _P2M24
    elif e == 31:
        v = np.float32(math.inf) if m == 0 else np.float32(math.nan)
    else:                                   # (1024 + m)·2**(e - 25), every factor exact
        v = np.float32(m | 1024) * (np.float32(np.int32(1) << e) * _P2M25)
    return -v if h & 0x8000 else v


@cuda.jit(**_DJ)
def _pow2(e):
    # 2**e as f32 for -149 <= e <= 127 (ldexpf is exact there, subnormals included)
    return np.float32(math.ldexp(np.float32(1.0), np.int32(e)))


@cuda.jit(**_DJ)
def _f32le(w, at):
    # the little-endian f32 at byte ``at``, from its integer fields
    u = (np.int64(_b(w, at)) | (np.int64(_b(w, at + 1)) << 8)
         | (np.int64(_b(w, at + 2)) << 16) | (np.int64(_b(w, at + 3)) << 24))
    e = np.int32((u >> 23) & 255)
    m = np.int32(u & 0x7FFFFF)
    if e == 0:
        v = np.float32(m) * _P2M149
    elif e == 255:
        v = np.float32(math.inf) if m == 0 else np.float32(math.nan)
    else:
        v = np.float32(m | 0x800000) * _pow2(e - 150)
    return -v if u & 0x80000000 else v


# ---- legacy 32-element blocks: one sub-block (s is 0) ------------------------------------

@cuda.jit(**_DJ)
def _dq_q4_0(w, base, s, dst, d0, col):
    d = _f16(w, base)
    for i in range(16):
        q = _b(w, base + 2 + i)
        dst[d0 + i, col] = d * np.float32((q & 15) - 8)
        dst[d0 + i + 16, col] = d * np.float32((q >> 4) - 8)


@cuda.jit(**_DJ)
def _dq_q4_1(w, base, s, dst, d0, col):
    d = _f16(w, base)
    mn = _f16(w, base + 2)
    for i in range(16):
        q = _b(w, base + 4 + i)
        dst[d0 + i, col] = d * np.float32(q & 15) + mn
        dst[d0 + i + 16, col] = d * np.float32(q >> 4) + mn


@cuda.jit(**_DJ)
def _qh32(w, at):
    # the 32-bit plane of fifth bits (bit j belongs to element j)
    return (np.int64(_b(w, at)) | (np.int64(_b(w, at + 1)) << 8)
            | (np.int64(_b(w, at + 2)) << 16) | (np.int64(_b(w, at + 3)) << 24))


@cuda.jit(**_DJ)
def _dq_q5_0(w, base, s, dst, d0, col):
    d = _f16(w, base)
    qh = _qh32(w, base + 2)
    for i in range(16):
        q = _b(w, base + 6 + i)
        lo = (q & 15) | np.int32(((qh >> i) & 1) << 4)
        hi = (q >> 4) | np.int32(((qh >> (i + 16)) & 1) << 4)
        dst[d0 + i, col] = d * np.float32(lo - 16)
        dst[d0 + i + 16, col] = d * np.float32(hi - 16)


@cuda.jit(**_DJ)
def _dq_q5_1(w, base, s, dst, d0, col):
    d = _f16(w, base)
    mn = _f16(w, base + 2)
    qh = _qh32(w, base + 4)
    for i in range(16):
        q = _b(w, base + 8 + i)
        lo = (q & 15) | np.int32(((qh >> i) & 1) << 4)
        hi = (q >> 4) | np.int32(((qh >> (i + 16)) & 1) << 4)
        dst[d0 + i, col] = d * np.float32(lo) + mn
        dst[d0 + i + 16, col] = d * np.float32(hi) + mn


@cuda.jit(**_DJ)
def _dq_q8_0(w, base, s, dst, d0, col):
    d = _f16(w, base)
    for i in range(32):
        dst[d0 + i, col] = d * np.float32(_i8(w[base + 2 + i]))


# ---- 4-bit non-linear and microscaling -----------------------------------------------

@cuda.jit(**_DJ)
def _dq_iq4_nl(w, base, s, dst, d0, col):
    d = _f16(w, base)
    for i in range(16):
        q = _b(w, base + 2 + i)
        dst[d0 + i, col] = d * _IQ4[q & 15]
        dst[d0 + i + 16, col] = d * _IQ4[q >> 4]


@cuda.jit(**_DJ)
def _dq_iq4_xs(w, base, s, dst, d0, col):
    # sub-block s of 32: a 6-bit scale (low 4 bits in a nibble, high 2 in the u16 plane)
    d = _f16(w, base)
    sh = _b(w, base + 2) | (_b(w, base + 3) << 8)
    lo = (_b(w, base + 4 + (s >> 1)) >> (4 * (s & 1))) & 15
    dl = d * np.float32((lo | (((sh >> (2 * s)) & 3) << 4)) - 32)
    at = base + 8 + 16 * s
    for i in range(16):
        q = _b(w, at + i)
        dst[d0 + i, col] = dl * _IQ4[q & 15]
        dst[d0 + i + 16, col] = dl * _IQ4[q >> 4]


@cuda.jit(**_DJ)
def _dq_mxfp4(w, base, s, dst, d0, col):
    # E8M0 exponent e: ggml's half scale 2**(e - 128) against doubled E2M1 values
    d = _pow2(_b(w, base) - 128)
    for i in range(16):
        q = _b(w, base + 1 + i)
        dst[d0 + i, col] = d * _E2M1X2[q & 15]
        dst[d0 + i + 16, col] = d * _E2M1X2[q >> 4]


@cuda.jit(**_DJ)
def _ue4m3_half(c):
    # an NVFP4 scale byte at half its value (bit 7 ignored, 0 and 0x7F read as 0)
    if c == 0 or c == 0x7F:
        return np.float32(0.0)
    ex = (c >> 3) & 15
    man = c & 7
    if ex == 0:
        return np.float32(man) * _P2M10
    return np.float32(8 + man) * _pow2(ex - 11)


@cuda.jit(**_DJ)
def _dq_nvfp4(w, base, s, dst, d0, col):
    # sub-block s of 16: its UE4M3 scale byte, then 8 bytes of codes
    d = _ue4m3_half(_b(w, base + s))
    at = base + 4 + 8 * s
    for i in range(8):
        q = _b(w, at + i)
        dst[d0 + i, col] = d * _E2M1X2[q & 15]
        dst[d0 + i + 8, col] = d * _E2M1X2[q >> 4]


# ---- ternary ---------------------------------------------------------------------------

@cuda.jit(**_DJ)
def _dq_tq2_0(w, base, s, dst, d0, col):
    # element 128h + 32k + l: bits 2k of byte 32h + l; sub-block s is (h, k) = (s//4, s%4)
    d = _f16(w, base + 64)
    at = base + 32 * (s >> 2)
    sh = 2 * (s & 3)
    for i in range(32):
        dst[d0 + i, col] = d * np.float32(((_b(w, at + i) >> sh) & 3) - 1)


@cuda.jit(**_DJ)
def _tq1_trit(w, base, e):
    # trit of element e: runs of 32, 16 and 4 bytes hold 5, 5 and 4 trits per byte
    if e < 160:
        at = base + (e & 31)
        k = e >> 5
    elif e < 240:
        at = base + 32 + ((e - 160) & 15)
        k = (e - 160) >> 4
    else:
        at = base + 48 + ((e - 240) & 3)
        k = (e - 240) >> 2
    p = 1
    for _ in range(k):
        p *= 3
    return (((_b(w, at) * p) & 255) * 3) >> 8


@cuda.jit(**_DJ)
def _dq_tq1_0(w, base, s, dst, d0, col):
    d = _f16(w, base + 52)
    for i in range(32):
        dst[d0 + i, col] = d * np.float32(_tq1_trit(w, base, 32 * s + i) - 1)
