"""CUDA device decoders of GGUF's K-quant super-blocks (Q2_K..Q8_K), as ``_quant_device``.

A sub-block ``s`` is one scale's run: 16 elements for Q2_K, Q3_K and Q6_K, 32 for Q4_K and
Q5_K (and for Q8_K, whose one f32 scale covers the block). Each weight is the numpy
decoder's f32 expression in its order: the sub-block scale ``d·sc`` first (exact: an f16
times at most 8 bits), then ``q·dl`` (and ``- dmin·m``).
"""
import numpy as np
from numba import cuda

from ._quant_device import _DJ, _b, _f16, _f32le, _i8


@cuda.jit(**_DJ)
def _crumb(w, at, e):
    # 2-bit code of element e = 128h + 32j + l: bits 2j of byte at + 32h + l
    return (_b(w, at + 32 * (e >> 7) + (e & 31)) >> (2 * ((e >> 5) & 3))) & 3


@cuda.jit(**_DJ)
def _dq_q2_k(w, base, s, dst, d0, col):
    sc = _b(w, base + s)
    dl = _f16(w, base + 80) * np.float32(sc & 15)
    ml = _f16(w, base + 82) * np.float32(sc >> 4)
    for i in range(16):
        dst[d0 + i, col] = np.float32(_crumb(w, base + 16, 16 * s + i)) * dl - ml


@cuda.jit(**_DJ)
def _dq_q3_k(w, base, s, dst, d0, col):
    # scale s: low 4 bits in nibble s//8 of byte 96 + s%8, high 2 at bits 2(s//4) of 104+s%4
    lo = (_b(w, base + 96 + (s & 7)) >> (4 * (s >> 3))) & 15
    hi = (_b(w, base + 104 + (s & 3)) >> (2 * (s >> 2))) & 3
    dl = _f16(w, base + 108) * np.float32((lo | (hi << 4)) - 32)
    for i in range(16):
        e = 16 * s + i
        # a clear bit e//32 in hmask byte e%32 subtracts 4
        hm = (_b(w, base + (e & 31)) >> (e >> 5)) & 1
        dst[d0 + i, col] = np.float32(_crumb(w, base + 32, e) - 4 * (1 - hm)) * dl


@cuda.jit(**_DJ)
def _scale_min_k4(w, at, s):
    # sub-block s's 6-bit (scale, min) from the 12-byte table at byte ``at``
    if s < 4:
        return _b(w, at + s) & 63, _b(w, at + s + 4) & 63
    sc = (_b(w, at + s + 4) & 15) | ((_b(w, at + s - 4) >> 6) << 4)
    mn = (_b(w, at + s + 4) >> 4) | ((_b(w, at + s) >> 6) << 4)
    return sc, mn


@cuda.jit(**_DJ)
def _dq_q4_k(w, base, s, dst, d0, col):
    sc, mn = _scale_min_k4(w, base + 4, s)
    dl = _f16(w, base) * np.float32(sc)
    ml = _f16(w, base + 2) * np.float32(mn)
    at = base + 16 + 32 * (s >> 1)
    sh = 4 * (s & 1)
    for i in range(32):
        dst[d0 + i, col] = np.float32((_b(w, at + i) >> sh) & 15) * dl - ml


@cuda.jit(**_DJ)
def _dq_q5_k(w, base, s, dst, d0, col):
    sc, mn = _scale_min_k4(w, base + 4, s)
    dl = _f16(w, base) * np.float32(sc)
    ml = _f16(w, base + 2) * np.float32(mn)
    at = base + 48 + 32 * (s >> 1)
    sh = 4 * (s & 1)
    for i in range(32):
        q = ((_b(w, at + i) >> sh) & 15) | (((_b(w, base + 16 + i) >> s) & 1) << 4)
        dst[d0 + i, col] = np.float32(q) * dl - ml


@cuda.jit(**_DJ)
def _dq_q6_k(w, base, s, dst, d0, col):
    # element 128h + 32t + l: low 4 bits in nibble t//2 of ql byte 64h + 32(t%2) + l,
    # high 2 bits at bits 2t of qh byte 128 + 32h + l
    dl = _f16(w, base + 208) * np.float32(_i8(w[base + 192 + s]))
    for i in range(16):
        e = 16 * s + i
        h = e >> 7
        t = (e >> 5) & 3
        ln = e & 31
        low = (_b(w, base + 64 * h + 32 * (t & 1) + ln) >> (4 * (t >> 1))) & 15
        high = (_b(w, base + 128 + 32 * h + ln) >> (2 * t)) & 3
        dst[d0 + i, col] = np.float32((low | (high << 4)) - 32) * dl


@cuda.jit(**_DJ)
def _dq_q8_k(w, base, s, dst, d0, col):
    d = _f32le(w, base)
    at = base + 4 + 32 * s
    for i in range(32):
        dst[d0 + i, col] = d * np.float32(_i8(w[at + i]))
