"""Numba source of the 256-element GGUF block decoders (K-quants, IQ4_XS, TQ1_0, TQ2_0).

Same contract as ``_quant_decode``: ``dec_<scheme>(buf, off, out, o)`` writes the block at
byte ``off`` to ``out[o:o + 256]`` exactly as the format defines. The sub-block loops walk
the output in order, 16 values (one ``_quant_simd`` step) at a time, and name the bytes
each value comes from.
"""
from __future__ import annotations

_Q2_K = '''
@njit(**_DJ)
def dec_q2_k(buf, off, out, o):
    # [16 bytes: sub-block s scale (low nibble), min (high)][64 bytes of 2-bit q][d][dmin]
    # value e = 128 h + 32 p + l is bits 2p..2p+1 of q byte 32 h + l: (d * sc) * q - dmin * m
    d = _f16(buf, off + 80)
    dmin = _f16(buf, off + 82)
    for s in range(16):
        sc = _byte(buf, off + s)
        src = off + 16 + 32 * (s // 8) + 16 * (s % 2)
        lanes16(out, o + 16 * s, buf, src, 2 * ((s % 8) // 2), 3, src, 0, 0, 0, _NZ,
                d * np.float32(sc & 15), -(dmin * np.float32(sc >> 4)))
'''

_Q3_K = '''
@njit(**_DJ)
def dec_q3_k(buf, off, out, o):
    # [32 bytes hmask][64 bytes 2-bit q as Q2_K][12 bytes of 6-bit scales][d f16]
    # q = low 2 bits - 4 where bit e // 32 of hmask byte e % 32 is 0: (d * sc) * q
    d = _f16(buf, off + 108)
    for s in range(16):
        low = (_byte(buf, off + 96 + s % 8) >> (4 * (s // 8))) & 15
        high = (_byte(buf, off + 104 + s % 4) >> (2 * (s // 4))) & 3
        l0 = 16 * (s % 2)
        src = off + 32 + 32 * (s // 8) + l0
        lanes16(out, o + 16 * s, buf, src, 2 * ((s % 8) // 2), 3, off + l0, s // 2, 1, 2,
                np.float32(-4), d * np.float32((low | (high << 4)) - 32), _NZ)
'''

# Q4_K and Q5_K share the 12-byte packing of eight 6-bit (scale, min) pairs.
_SCALE_MIN = '''
@njit(**_DJ)
def _scale_min_k4(buf, s, j):
    # pair j of the 12 bytes at buf[s:]: j < 4 in bytes j, j + 4; j >= 4 split over three
    if j < 4:
        return _byte(buf, s + j) & 63, _byte(buf, s + j + 4) & 63
    sc = (_byte(buf, s + j + 4) & 15) | ((_byte(buf, s + j - 4) >> 6) << 4)
    mn = (_byte(buf, s + j + 4) >> 4) | ((_byte(buf, s + j) >> 6) << 4)
    return sc, mn
'''

_Q4_K = _SCALE_MIN + '''

@njit(**_DJ)
def dec_q4_k(buf, off, out, o):
    # [d][dmin][12 bytes scales/mins][128 bytes: sub-block j in the j % 2 nibbles of 32
    # bytes from 32 (j // 2)]: (d * sc) * q - dmin * m
    d = _f16(buf, off)
    dmin = _f16(buf, off + 2)
    for j in range(8):
        sc, mn = _scale_min_k4(buf, off + 4, j)
        dj = d * np.float32(sc)
        mj = -(dmin * np.float32(mn))
        src = off + 16 + 32 * (j // 2)
        sh = 4 * (j % 2)
        lanes16(out, o + 32 * j, buf, src, sh, 15, src, 0, 0, 0, _NZ, dj, mj)
        lanes16(out, o + 32 * j + 16, buf, src + 16, sh, 15, src, 0, 0, 0, _NZ, dj, mj)
'''

_Q5_K = _SCALE_MIN + '''

@njit(**_DJ)
def dec_q5_k(buf, off, out, o):
    # Q4_K's layout with 32 bytes qh before the nibbles: bit j of qh byte t is the fifth bit
    d = _f16(buf, off)
    dmin = _f16(buf, off + 2)
    for j in range(8):
        sc, mn = _scale_min_k4(buf, off + 4, j)
        dj = d * np.float32(sc)
        mj = -(dmin * np.float32(mn))
        src = off + 48 + 32 * (j // 2)
        sh = 4 * (j % 2)
        lanes16(out, o + 32 * j, buf, src, sh, 15, off + 16, j, 1, 4, _NZ, dj, mj)
        lanes16(out, o + 32 * j + 16, buf, src + 16, sh, 15, off + 32, j, 1, 4, _NZ, dj, mj)
'''

_Q6_K = '''
@njit(**_DJ)
def dec_q6_k(buf, off, out, o):
    # [128 bytes low nibbles][64 bytes high 2-bit pairs][16 int8 scales][d f16]
    # value e = 128 h + r: low nibble r // 64 of byte 64 h + r % 64, high bits 2 (r // 32)
    # of byte 32 h + r % 32; (d * scale[e // 16]) * (q - 32)
    d = _f16(buf, off + 208)
    for s in range(16):
        sc = np.float32(np.int8(_byte(buf, off + 192 + s)))
        r0 = 16 * (s % 8)
        src = off + 64 * (s // 8) + r0 % 64
        srh = off + 128 + 32 * (s // 8) + r0 % 32
        lanes16(out, o + 16 * s, buf, src, 4 * (r0 // 64), 15, srh, 2 * (r0 // 32), 3, 4,
                np.float32(-32), d * sc, _NZ)
'''

_Q8_K = '''
@njit(**_DJ)
def dec_q8_k(buf, off, out, o):
    # [d f32][256 int8][16 int16 block sums, not needed to decode]: d * q
    d = _f32(buf, off)
    for i in range(16):
        lanes16_i8(out, o + 16 * i, buf, off + 4 + 16 * i, d)
'''

_IQ4_XS = '''{IQ4_TABLE}

@njit(**_DJ)
def dec_iq4_xs(buf, off, out, o):
    # [d f16][scales_h u16][4 bytes scales_l][128 bytes: sub-block j in 16 bytes from 16 j,
    # low nibbles then high]: (d * (6-bit scale - 32)) * _KV_IQ4[index]
    d = _f16(buf, off)
    sh_bits = _byte(buf, off + 2) | (_byte(buf, off + 3) << 8)
    for j in range(8):
        low = (_byte(buf, off + 4 + j // 2) >> (4 * (j % 2))) & 15
        high = (sh_bits >> (2 * j)) & 3
        dl = d * np.float32((low | (high << 4)) - 32)
        q = buf[off + 8 + 16 * j:off + 24 + 16 * j]
        lo = out[o + 32 * j:o + 32 * j + 16]
        hi = out[o + 32 * j + 16:o + 32 * j + 32]
        for t in range(16):
            lo[t] = dl * _KV_IQ4[q[t] & 15]
        for t in range(16):
            hi[t] = dl * _KV_IQ4[q[t] >> 4]
'''

_TQ1_0 = '''
_POW3 = np.array([1, 3, 9, 27, 81], dtype=np.int64)


@njit(**_DJ)
def _tq1_run(buf, src, width, digits, d, out, o):
    # width bytes each holding `digits` base-3 digits as a fixed-point fraction of 256:
    # digit p of byte l is the top 8 bits of 3 * ((byte * 3^p) mod 256), minus 1
    for p in range(digits):
        dst = out[o + p * width:o + (p + 1) * width]
        q = buf[src:src + width]
        for l in range(width):
            v = (int(q[l]) * _POW3[p]) & 255
            dst[l] = d * np.float32(((v * 3) >> 8) - 1)


@njit(**_DJ)
def dec_tq1_0(buf, off, out, o):
    # [48 bytes qs: 32 then 16 bytes of 5 digits][4 bytes qh of 4 digits][d f16]
    d = _f16(buf, off + 52)
    _tq1_run(buf, off, 32, 5, d, out, o)
    _tq1_run(buf, off + 32, 16, 5, d, out, o + 160)
    _tq1_run(buf, off + 48, 4, 4, d, out, o + 240)
'''

_TQ2_0 = '''
@njit(**_DJ)
def dec_tq2_0(buf, off, out, o):
    # [64 bytes: value 128 h + 32 p + l is bits 2p..2p+1 of byte 32 h + l, minus 1][d f16]
    d = _f16(buf, off + 64)
    for g in range(8):
        src = off + 32 * (g // 4)
        sh = 2 * (g % 4)
        lanes16(out, o + 32 * g, buf, src, sh, 3, src, 0, 0, 0, np.float32(-1), d, _NZ)
        lanes16(out, o + 32 * g + 16, buf, src + 16, sh, 3, src, 0, 0, 0, np.float32(-1), d,
                _NZ)
'''

# scheme name -> (decoder function, source); {IQ4_TABLE} is filled by _quant_decode
K_DECODERS = {
    "Q2_K": ("dec_q2_k", _Q2_K),
    "Q3_K": ("dec_q3_k", _Q3_K),
    "Q4_K": ("dec_q4_k", _Q4_K),
    "Q5_K": ("dec_q5_k", _Q5_K),
    "Q6_K": ("dec_q6_k", _Q6_K),
    "Q8_K": ("dec_q8_k", _Q8_K),
    "IQ4_XS": ("dec_iq4_xs", _IQ4_XS),
    "TQ1_0": ("dec_tq1_0", _TQ1_0),
    "TQ2_0": ("dec_tq2_0", _TQ2_0),
}
