"""Numba source of the GGUF block decoders: one ``dec_<scheme>(buf, off, out, o)`` each.

A decoder reads the block that starts at byte ``off`` of the uint8 buffer ``buf`` and
writes its ``block_size`` float32 values to ``out[o:o + block_size]``, bit for bit what
the format defines (and gguf-py computes): every product is taken in f32 in the order the
format states (``(d * sc) * q - dmin * m`` for Q4_K), f16 scale fields go through ``_f16``
(exact, as numpy's ``astype``). The decoders are ``inline="always"``, so each driver
(``_quant_kernels``) gets the decode of its scheme pasted into its loops. This module holds
the 32-element schemes and the shared helpers; ``_quant_decode_k`` the 256-element ones.
"""
from __future__ import annotations

import re

from ._quant_decode_iq import IQ_DECODERS
from ._quant_decode_k import K_DECODERS
from ._quant_simd import SIMD_VERSION

HELPERS = '''
from rlx_ref.backends.numba_cpu._quant_simd import (
    claim, f16_at, lanes16, lanes16_bits, lanes16_bits_dot, lanes16_dot, lanes16_i8,
    lanes16_i8_dot, prefetch, vadd16, vsum16, vzero16)
# _quant_simd {simd}

_DJ = dict(cache=True, nogil=True, inline="always")
_NZ = np.float32(-0.0)      # x + -0.0 == x for every x (+0.0 would turn -0.0 into +0.0)


@njit(**_DJ)
def _byte(buf, i):
    # buf[i] for an index known to be in range: unsigned, so Numba emits no negative-index
    # wraparound (a compare and a select per read)
    return int(buf[np.uint64(i)])


@njit(**_DJ)
def _f16_bits(buf, off):
    # the little-endian IEEE half at buf[off:off + 2] as f32 by its bits (NaN payload kept)
    return _half(_byte(buf, off) | (_byte(buf, off + 1) << 8))


@njit(**_DJ)
def _half(h):
    # the IEEE half with bits h as f32, exactly
    sign = (h & 0x8000) << 16
    e = (h >> 10) & 0x1F
    mant = h & 0x3FF
    if e == 0:
        # zero or subnormal: mant * 2^-24 is exact in f32
        v = np.float32(mant) * np.float32(5.9604644775390625e-08)
        return -v if sign else v
    if e == 31:
        bits = sign | 0x7F800000 | (mant << 13)       # inf, NaN (payload kept)
    else:
        bits = sign | ((e + 112) << 23) | (mant << 13)
    return np.uint32(bits).view(np.float32)


@njit(**_DJ)
def _f16(buf, off):
    # the half as f32, exactly as numpy's astype: the hardware conversion (fpext) quiets a
    # signalling NaN, numpy keeps its bits, so NaNs take the bit path
    v = f16_at(buf, off)
    return v if v == v else _f16_bits(buf, off)


@njit(**_DJ)
def _f32(buf, off):
    # the little-endian IEEE single at buf[off:off + 4]
    bits = (_byte(buf, off) | (_byte(buf, off + 1) << 8) | (_byte(buf, off + 2) << 16)
            | (_byte(buf, off + 3) << 24))
    return np.uint32(bits).view(np.float32)


@njit(**_DJ)
def _u32(buf, off):
    # the little-endian uint32 at buf[off:off + 4]
    return (_byte(buf, off) | (_byte(buf, off + 1) << 8) | (_byte(buf, off + 2) << 16)
            | (_byte(buf, off + 3) << 24))
'''

# The 16 IQ4_NL levels (and IQ4_XS's), as ggml-common.h's kvalues_iq4nl defines them.
_IQ4_TABLE = '''
_KV_IQ4 = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
                    113], dtype=np.float32)
'''

_Q4_0 = '''
@njit(**_DJ)
def dec_q4_0(buf, off, out, o):
    # [d f16][16 bytes: element i in the low nibble of byte i, i + 16 in its high nibble]
    # d * (q - 8)
    d = _f16(buf, off)
    lanes16(out, o, buf, off + 2, 0, 15, off + 2, 0, 0, 0, np.float32(-8), d, _NZ)
    lanes16(out, o + 16, buf, off + 2, 4, 15, off + 2, 0, 0, 0, np.float32(-8), d, _NZ)
'''

_Q4_1 = '''
@njit(**_DJ)
def dec_q4_1(buf, off, out, o):
    # [d f16][m f16][16 nibble bytes as Q4_0]: d * q + m
    d = _f16(buf, off)
    m = _f16(buf, off + 2)
    lanes16(out, o, buf, off + 4, 0, 15, off + 4, 0, 0, 0, _NZ, d, m)
    lanes16(out, o + 16, buf, off + 4, 4, 15, off + 4, 0, 0, 0, _NZ, d, m)
'''

_Q5_0 = '''
@njit(**_DJ)
def dec_q5_0(buf, off, out, o):
    # [d f16][qh u32: bit i is element i's fifth bit][16 nibble bytes as Q4_0]: d * (q - 16)
    d = _f16(buf, off)
    qh = _u32(buf, off + 2)
    lanes16_bits(out, o, buf, off + 6, 0, 15, qh, 0, 4, np.float32(-16), d, _NZ)
    lanes16_bits(out, o + 16, buf, off + 6, 4, 15, qh, 16, 4, np.float32(-16), d, _NZ)
'''

_Q5_1 = '''
@njit(**_DJ)
def dec_q5_1(buf, off, out, o):
    # [d f16][m f16][qh u32][16 nibble bytes]: d * q + m
    d = _f16(buf, off)
    m = _f16(buf, off + 2)
    qh = _u32(buf, off + 4)
    lanes16_bits(out, o, buf, off + 8, 0, 15, qh, 0, 4, _NZ, d, m)
    lanes16_bits(out, o + 16, buf, off + 8, 4, 15, qh, 16, 4, _NZ, d, m)
'''

_Q8_0 = '''
@njit(**_DJ)
def dec_q8_0(buf, off, out, o):
    # [d f16][32 int8]: q * d
    d = _f16(buf, off)
    lanes16_i8(out, o, buf, off + 2, d)
    lanes16_i8(out, o + 16, buf, off + 18, d)
'''

_IQ4_NL = '''
@njit(**_DJ)
def dec_iq4_nl(buf, off, out, o):
    # [d f16][16 nibble bytes as Q4_0, each nibble an index into _KV_IQ4]: d * level
    d = _f16(buf, off)
    q = buf[off + 2:off + 18]
    lo = out[o:o + 16]
    hi = out[o + 16:o + 32]
    for i in range(16):
        lo[i] = d * _KV_IQ4[q[i] & 15]
    for i in range(16):
        hi[i] = d * _KV_IQ4[q[i] >> 4]
'''

# MXFP4's e2m1 values, doubled (the OCP MX spec's FP4 grid x 2, as ggml stores them); the
# block scale is then taken at half (_e8m0_half) so the product is the spec's value.
_MXFP4 = '''
_KV_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12],
                     dtype=np.float32)


@njit(**_DJ)
def _e8m0_half(e):
    # 2^(e - 127) / 2 as f32 bits (subnormal for e < 2)
    bits = (0x00200000 << e) if e < 2 else ((e - 1) << 23)
    return np.uint32(bits).view(np.float32)


@njit(**_DJ)
def dec_mxfp4(buf, off, out, o):
    # [e8m0 exponent byte][16 nibble bytes as Q4_0, each an index into _KV_MXFP4]
    d = _e8m0_half(_byte(buf, off))
    q = buf[off + 1:off + 17]
    lo = out[o:o + 16]
    hi = out[o + 16:o + 32]
    for i in range(16):
        lo[i] = d * _KV_MXFP4[q[i] & 15]
    for i in range(16):
        hi[i] = d * _KV_MXFP4[q[i] >> 4]
'''

# NVFP4: four 16-value sub-blocks, each with an unsigned E4M3 scale (bias 7) taken at half
# like MXFP4's, and the same doubled e2m1 levels.
_NVFP4 = _MXFP4.split("@njit(**_DJ)")[0] + '''
@njit(**_DJ)
def _ue4m3_half(v):
    # unsigned E4M3 (bias 7) / 2; 0 and 0x7F (its NaN) decode to 0
    e = (v >> 3) & 15
    m = v & 7
    if v == 0 or v == 0x7F:
        return np.float32(0)
    if e == 0:
        return np.float32(m) * np.float32(2.0 ** -10)
    return np.float32((8 + m) * 2.0 ** (e - 11))


@njit(**_DJ)
def dec_nvfp4(buf, off, out, o):
    # [4 scale bytes][4 x 8 bytes: sub-block s holds values 16 s .. 16 s + 7 in the low
    # nibbles of its 8 bytes, 16 s + 8 .. 16 s + 15 in the high ones]
    for s in range(4):
        d = _ue4m3_half(_byte(buf, off + s))
        q = buf[off + 4 + 8 * s:off + 12 + 8 * s]
        lo = out[o + 16 * s:o + 16 * s + 8]
        hi = out[o + 16 * s + 8:o + 16 * s + 16]
        for i in range(8):
            lo[i] = d * _KV_MXFP4[q[i] & 15]
        for i in range(8):
            hi[i] = d * _KV_MXFP4[q[i] >> 4]
'''

# scheme name -> (decoder function, its source: tables and functions it needs)
DECODERS = {
    "Q4_0": ("dec_q4_0", _Q4_0),
    "Q4_1": ("dec_q4_1", _Q4_1),
    "Q5_0": ("dec_q5_0", _Q5_0),
    "Q5_1": ("dec_q5_1", _Q5_1),
    "Q8_0": ("dec_q8_0", _Q8_0),
    "IQ4_NL": ("dec_iq4_nl", _IQ4_TABLE + _IQ4_NL),
    "MXFP4": ("dec_mxfp4", _MXFP4),
    "NVFP4": ("dec_nvfp4", _NVFP4),
    **{name: (fn, src.replace("{IQ4_TABLE}", _IQ4_TABLE))
       for name, (fn, src) in K_DECODERS.items()},
    **IQ_DECODERS,
}


def decoder_source(scheme: str) -> tuple[str, str]:
    """(decoder function name, Numba source defining it and its helpers) for ``scheme``."""
    fn, src = DECODERS[scheme]
    return fn, HELPERS.replace("{simd}", SIMD_VERSION) + src


_STEP = re.compile(r"^(\s+)(lanes16\w*)\(out, ", re.M)


def dot_source(scheme: str) -> tuple[str, str] | None:
    """(name, source) of ``dot_<scheme>(buf, off, x, o, acc) -> acc + block . x[o:]``, to
    paste after ``decoder_source``: the decoder with every 16-lane store turned into its
    fused multiply-add form; None when the decoder writes ``out`` other than through those
    steps (its GEMV keeps the scratch path)."""
    fn, src = DECODERS[scheme]
    head = f"def {fn}(buf, off, out, o):\n"
    body = src[src.index(head) + len(head):].rstrip() + "\n"
    fused = _STEP.sub(lambda mt: f"{mt.group(1)}acc = {mt.group(2)}_dot(acc, x, ", body)
    if re.search(r"\bout\b", fused):
        return None
    name = "dot" + fn[3:]
    return name, f"\n\n@njit(**_DJ)\ndef {name}(buf, off, x, o, acc):\n{fused}    return acc\n"
