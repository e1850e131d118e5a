"""Numba source of the codebook (IQ2 / IQ3 / IQ1) block decoders.

Same contract as ``_quant_decode``: ``dec_<scheme>(buf, off, out, o)`` writes the block's
256 values to ``out[o:o + 256]``, bit for bit the scheme record's decode (``blocks_iq``:
``db * (point * sign)`` with the sign ±1, ``dl * (point + delta)`` for IQ1). The codebooks
are the record module's own tables (``blocks_iq.grid``), frozen into the compiled code as
constants; their hash is part of the source, so a change to them retires cached kernels.
Every value is a table lookup, so these decoders are scalar loops (no 16-lane steps) and
their GEMV goes through a decoded row.
"""
from __future__ import annotations

import hashlib

from ...quant._iq_grids import BITMAPS

GRIDS_VERSION = hashlib.sha256(b"".join(BITMAPS[k] for k in sorted(BITMAPS))).hexdigest()[:16]

_TABLES = f'''
from rlx_ref.quant.blocks_iq import KSIGNS as _KSIGNS_U8, grid as _iq_grid
# codebooks {GRIDS_VERSION}

_KSIGNS = _KSIGNS_U8.astype(np.int64)
_G2XXS = _iq_grid("IQ2XXS")
_G2XS = _iq_grid("IQ2XS")
_G2S = _iq_grid("IQ2S")
_G3XXS = _iq_grid("IQ3XXS")
_G3S = _iq_grid("IQ3S")
_G1S = _iq_grid("IQ1S")


@njit(**_DJ)
def _signed8(out, o, grid, p, signs, db):
    # out[o + j] = db * (grid[p, j] * (-1 if bit j of signs else 1)), j < 8
    for j in range(8):
        g = grid[p, j]
        out[o + j] = db * (-g if (signs >> j) & 1 else g)


@njit(**_DJ)
def _signed4(out, o, grid, p, signs, shift, db):
    # four values of a 4-wide point, signs from bits shift .. shift + 3
    for j in range(4):
        g = grid[p, j]
        out[o + j] = db * (-g if (signs >> (shift + j)) & 1 else g)


@njit(**_DJ)
def _u16(buf, off):
    return _byte(buf, off) | (_byte(buf, off + 1) << 8)
'''

_IQ2_XXS = '''
@njit(**_DJ)
def dec_iq2_xxs(buf, off, out, o):
    # [d][8 x (4 point bytes, u32: 4 x 7-bit ksigns | scale << 28)]: d*(s+1/2)/4 per 32
    d = _f16(buf, off)
    for g in range(8):
        aux = _u32(buf, off + 6 + 8 * g)
        db = d * (np.float32(aux >> 28) + np.float32(0.5)) * np.float32(0.25)
        for l in range(4):
            _signed8(out, o + 32 * g + 8 * l, _G2XXS, _byte(buf, off + 2 + 8 * g + l),
                     _KSIGNS[(aux >> (7 * l)) & 127], db)
'''

_IQ2_XS = '''
@njit(**_DJ)
def dec_iq2_xs(buf, off, out, o):
    # [d][32 x u16: 9-bit point | 7-bit ksigns << 9][8 bytes: 4-bit scales per 16]
    d = _f16(buf, off)
    for i in range(32):
        q = _u16(buf, off + 2 + 2 * i)
        sc = (_byte(buf, off + 66 + i // 4) >> (4 * ((i // 2) % 2))) & 15
        db = d * (np.float32(sc) + np.float32(0.5)) * np.float32(0.25)
        _signed8(out, o + 8 * i, _G2XS, q & 511, _KSIGNS[q >> 9], db)
'''

_IQ2_S = '''
@njit(**_DJ)
def dec_iq2_s(buf, off, out, o):
    # [d][32 point low bytes][32 sign bytes][8 bytes: 2 high point bits each x 4]
    # [8 bytes: 4-bit scales per 16]
    d = _f16(buf, off)
    for i in range(32):
        hi = (_byte(buf, off + 66 + i // 4) >> (2 * (i % 4))) & 3
        sc = (_byte(buf, off + 74 + i // 4) >> (4 * ((i // 2) % 2))) & 15
        db = d * (np.float32(sc) + np.float32(0.5)) * np.float32(0.25)
        _signed8(out, o + 8 * i, _G2S, _byte(buf, off + 2 + i) | (hi << 8),
                 _byte(buf, off + 34 + i), db)
'''

_IQ3_XXS = '''
@njit(**_DJ)
def dec_iq3_xxs(buf, off, out, o):
    # [d][64 point bytes (4 values each)][8 x u32: 4 x 7-bit ksigns | scale << 28]
    d = _f16(buf, off)
    for g in range(8):
        aux = _u32(buf, off + 66 + 4 * g)
        db = d * (np.float32(aux >> 28) + np.float32(0.5)) * np.float32(0.5)
        for l in range(4):
            signs = _KSIGNS[(aux >> (7 * l)) & 127]
            for h in range(2):
                _signed4(out, o + 32 * g + 8 * l + 4 * h, _G3XXS,
                         _byte(buf, off + 2 + 8 * g + 2 * l + h), signs, 4 * h, db)
'''

_IQ3_S = '''
@njit(**_DJ)
def dec_iq3_s(buf, off, out, o):
    # [d][64 point low bytes][8 bytes: point 8g + j's bit 8 at bit j of byte g]
    # [32 sign bytes, one per 8 values][4 bytes: 4-bit scales per 32]: d*(1+2s)
    d = _f16(buf, off)
    for i in range(32):
        sc = (_byte(buf, off + 106 + i // 8) >> (4 * ((i // 4) % 2))) & 15
        db = d * (np.float32(2) * np.float32(sc) + np.float32(1))
        signs = _byte(buf, off + 74 + i)
        for h in range(2):
            p = 2 * i + h
            hi = (_byte(buf, off + 66 + p // 8) >> (p % 8)) & 1
            _signed4(out, o + 8 * i + 4 * h, _G3S, _byte(buf, off + 2 + p) | (hi << 8),
                     signs, 4 * h, db)
'''

_IQ1 = '''
@njit(**_DJ)
def _iq1_point(out, o, p, dl, neg):
    # dl * (point + delta), delta = -1/8 when neg else +1/8
    delta = np.float32(-0.125) if neg else np.float32(0.125)
    for j in range(8):
        out[o + j] = dl * (_G1S[p, j] + delta)


@njit(**_DJ)
def dec_iq1_s(buf, off, out, o):
    # [d][32 point low bytes][8 x u16: 4 x 3 high point bits | 3-bit scale << 12 |
    # delta sign << 15], one word per 32 values: dl = d*(2s+1)
    d = _f16(buf, off)
    for g in range(8):
        qh = _u16(buf, off + 34 + 2 * g)
        dl = d * np.float32(2 * ((qh >> 12) & 7) + 1)
        for k in range(4):
            p = _byte(buf, off + 2 + 4 * g + k) | (((qh >> (3 * k)) & 7) << 8)
            _iq1_point(out, o + 32 * g + 8 * k, p, dl, qh & 0x8000)


@njit(**_DJ)
def dec_iq1_m(buf, off, out, o):
    # [32 point low bytes][16 bytes: a nibble per point (3 high bits | delta sign << 3)]
    # [4 x u16: four 3-bit scales per word (one per 16 values); top nibbles: the f16 d]
    w0 = _u16(buf, off + 48)
    w1 = _u16(buf, off + 50)
    w2 = _u16(buf, off + 52)
    w3 = _u16(buf, off + 54)
    d = _half((w0 >> 12) | ((w1 >> 8) & 0xF0) | ((w2 >> 4) & 0xF00) | (w3 & 0xF000))
    for p in range(32):
        s = p // 2
        sc = (_u16(buf, off + 48 + 2 * (s // 4)) >> (3 * (s % 4))) & 7
        dl = d * np.float32(2 * sc + 1)
        nib = (_byte(buf, off + 32 + p // 2) >> (4 * (p % 2))) & 15
        _iq1_point(out, o + 8 * p, _byte(buf, off + p) | ((nib & 7) << 8), dl, nib & 8)
'''

IQ_DECODERS = {
    "IQ2_XXS": ("dec_iq2_xxs", _TABLES + _IQ2_XXS),
    "IQ2_XS": ("dec_iq2_xs", _TABLES + _IQ2_XS),
    "IQ2_S": ("dec_iq2_s", _TABLES + _IQ2_S),
    "IQ3_XXS": ("dec_iq3_xxs", _TABLES + _IQ3_XXS),
    "IQ3_S": ("dec_iq3_s", _TABLES + _IQ3_S),
    "IQ1_S": ("dec_iq1_s", _TABLES + _IQ1),
    "IQ1_M": ("dec_iq1_m", _TABLES + _IQ1),
}
