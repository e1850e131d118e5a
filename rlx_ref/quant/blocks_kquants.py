"""GGUF's K-quant super-blocks (256 elements): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.

A super-block holds 8 sub-blocks of 32 (Q4_K, Q5_K) or 16 sub-blocks of 16 (Q2_K, Q3_K,
Q6_K) elements, each with a small integer scale (and for Q2/Q4/Q5 a min) multiplied by one
or two f16 super-scales. Decoding is vectorized over ``[n, block_bytes]`` uint8 blocks and
does gguf-py's f32 operations in gguf-py's order (which is ggml's ``dequantize_row_*``), so
the results agree bit for bit; Q8_K, which gguf-py lacks, decodes as ggml does (d * q).

gguf-py has no K-quant quantizer: these follow llama.cpp's ``quantize_row_q*_K_ref``
(the scale searches are in ``blocks_kquants_ref``), tested by error bounds.
"""
from __future__ import annotations

import numpy as np

from .blocks_kquants_ref import (F, GROUP_MAX_EPS, make_q3, make_qkx2, make_qx, nearest_int,
                                 seq_sum)
from .blocks_legacy import check_blocks, check_values, f16_bytes, f16_field, quiet
from ._blockfields import quiet as quiet_decode
from .scheme import SchemeDef, register

QK_K = 256
_SHIFT2 = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
_BITS8 = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)


def _chunked(fn):
    """Quantize 1024 super-blocks at a time: the searches make a dozen temporaries per
    step, which stay in cache at this size (3x faster than 8192 blocks at once)."""
    def run(x):
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[0] <= 1024:
            return fn(x)
        return np.concatenate([fn(x[i:i + 1024]) for i in range(0, x.shape[0], 1024)])
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def _f16_round(v: np.ndarray) -> np.ndarray:
    """An f32 ``[n]`` stored as f16 and read back (the reference reuses the stored d)."""
    return v.astype(np.float16).astype(F)


def _wrap_i8(v: np.ndarray) -> np.ndarray:
    """C's int -> int8_t conversion (two's complement wrap), as int32."""
    return ((v + 128) & 0xFF) - 128


def _crumbs(qs: np.ndarray) -> np.ndarray:
    """2-bit codes: ``[n, 64]`` bytes -> ``[n, 256]``; element 128h+32j+l is bits 2j of byte
    32h+l (l < 32)."""
    n = qs.shape[0]
    return ((qs.reshape(n, 2, 1, 32) >> _SHIFT2) & 3).reshape(n, QK_K)


def _pack_crumbs(lv: np.ndarray) -> np.ndarray:
    """Inverse of ``_crumbs`` for codes 0..3."""
    r = lv.reshape(-1, 2, 4, 32).astype(np.uint8) << _SHIFT2
    return np.bitwise_or.reduce(r, axis=2).reshape(-1, 64)


def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 12-byte 6-bit scale/min table of Q4_K and Q5_K -> ``sc``, ``m`` ``[n, 8]``."""
    lo, mid, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([lo & 63, (hi & 0x0F) | ((lo >> 6) << 4)], axis=1)
    m = np.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return sc, m


def _pack_scale_min_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Inverse of ``_scale_min_k4`` for 6-bit ``ls``, ``lm`` ``[n, 8]``."""
    ls, lm = ls.astype(np.uint8), lm.astype(np.uint8)
    return np.concatenate([ls[:, :4] | ((ls[:, 4:] >> 4) << 6),
                           lm[:, :4] | ((lm[:, 4:] >> 4) << 6),
                           (ls[:, 4:] & 0x0F) | ((lm[:, 4:] & 0x0F) << 4)], axis=1)


def _q3_scales(s: np.ndarray) -> np.ndarray:
    """The 12-byte 6-bit scale table of Q3_K -> signed scales ``[n, 16]`` (int8, -32..31).
    Scale i: low 4 bits from nibble i//8 of byte i%8, high 2 bits from bits 2*(i//4) of
    byte 8 + i%4."""
    n = s.shape[0]
    low = (s[:, None, 0:8] >> np.array([0, 4], np.uint8).reshape(1, 2, 1)) & 0x0F
    high = (s[:, None, 8:12] >> _SHIFT2[0]) & 3
    return ((low.reshape(n, 16) | (high.reshape(n, 16) << 4)).astype(np.int8)
            - np.int8(32))


def _pack_q3_scales(l6: np.ndarray) -> np.ndarray:
    """Inverse of ``_q3_scales`` for unsigned 6-bit codes (scale + 32) ``[n, 16]``."""
    l6 = l6.astype(np.uint8)
    low = (l6[:, :8] & 0x0F) | ((l6[:, 8:] & 0x0F) << 4)
    high = ((l6 >> 4).reshape(-1, 4, 4) << _SHIFT2[0]).astype(np.uint8)
    return np.concatenate([low, np.bitwise_or.reduce(high, axis=1)], axis=1)


def _requant(x, d, nmax_lo, nmax_hi, lv, offset=None):
    """The reference's final pass: with the stored per-sub-block scale ``d`` ``[R]`` (and
    offset), recompute each code; a sub-block whose scale is 0 keeps ``lv``."""
    with np.errstate(all="ignore"):
        v = x if offset is None else x + offset[:, None]
        lnew = np.clip(nearest_int(v / d[:, None]), nmax_lo, nmax_hi) - nmax_lo
    return np.where((d == 0)[:, None], lv, lnew).astype(np.uint8)


def _positive_max(v: np.ndarray) -> np.ndarray:
    """``m = 0; if (v > m) m = v`` over each row."""
    mx = v.max(axis=1)
    return np.where(mx > 0, mx, F(0))


# ---- Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin ---------------

@quiet_decode
def dequant_q2_k(blocks):
    b = check_blocks("Q2_K", blocks, 84)
    n = b.shape[0]
    sc = b[:, :16]
    dl = (f16_field(b, 80) * (sc & 0x0F).astype(F))[:, :, None]
    ml = (f16_field(b, 82) * (sc >> 4).astype(F))[:, :, None]
    out = _crumbs(b[:, 16:80]).reshape(n, 16, 16).astype(F)
    out *= dl
    out -= ml
    return out.reshape(n, QK_K)


@_chunked
@quiet
def quant_q2_k(x):
    x = check_values("Q2_K", x, QK_K)
    n = x.shape[0]
    sub = x.reshape(n * 16, 16)
    scale, the_min, lv = make_qkx2(sub, np.abs(sub), 3, -0.5, 0.1, 15, True)
    scales, mins = scale.reshape(n, 16), the_min.reshape(n, 16)
    max_scale, max_min = _positive_max(scales), _positive_max(mins)
    has_s, has_m = max_scale > 0, max_min > 0
    ls = nearest_int((F(15) / max_scale)[:, None] * scales) & 0xFF
    lm = nearest_int((F(15) / max_min)[:, None] * mins)
    sc = np.where(has_s[:, None], ls, 0)
    sc = np.where(has_m[:, None], (sc | (lm << 4)) & 0xFF, sc).astype(np.uint8)
    d = np.where(has_s, max_scale / F(15), F(0))[:, None]
    dmin = np.where(has_m, max_min / F(15), F(0))[:, None]
    dq = _f16_round(d[:, 0])[:, None] * (sc & 0x0F).astype(F)
    mq = _f16_round(dmin[:, 0])[:, None] * (sc >> 4).astype(F)
    lv = _requant(sub, dq.reshape(-1), 0, 3, lv, mq.reshape(-1))
    return np.concatenate([sc, _pack_crumbs(lv), f16_bytes(d), f16_bytes(dmin)], axis=1)


# ---- Q3_K: hmask[32], qs[64], scales[12], d ---------------------------------------------

@quiet_decode
def dequant_q3_k(blocks):
    b = check_blocks("Q3_K", blocks, 110)
    n = b.shape[0]
    dl = (f16_field(b, 108) * _q3_scales(b[:, 96:108]).astype(F))[:, :, None]
    hm = ((b[:, None, 0:32] >> _BITS8) & 1).reshape(n, QK_K)
    q = _crumbs(b[:, 32:96]).astype(np.int8) - ((hm ^ 1) << 2).astype(np.int8)
    out = q.reshape(n, 16, 16).astype(F)
    out *= dl
    return out.reshape(n, QK_K)


@_chunked
@quiet
def quant_q3_k(x):
    x = check_values("Q3_K", x, QK_K)
    n = x.shape[0]
    sub = x.reshape(n * 16, 16)
    scale, lv = make_q3(sub, 4)
    scales = scale.reshape(n, 16)
    i = np.abs(scales).argmax(axis=1)[:, None]
    max_scale = np.take_along_axis(scales, i, axis=1)[:, 0]
    nz = max_scale != 0
    iscale = F(-32) / max_scale
    l6 = np.clip(_wrap_i8(nearest_int(iscale[:, None] * scales)), -32, 31) + 32
    packed = np.where(nz[:, None], _pack_q3_scales(l6), np.uint8(0))
    d = np.where(nz, F(1) / iscale, F(0))[:, None]
    dq = _f16_round(d[:, 0])[:, None] * _q3_scales(packed).astype(F)
    lv = _requant(sub, dq.reshape(-1), -4, 3, lv).reshape(n, 8, 32)
    high = lv > 3
    hmask = np.bitwise_or.reduce(high.astype(np.uint8) << _BITS8, axis=1)
    lv = np.where(high, lv - 4, lv)
    return np.concatenate([hmask, _pack_crumbs(lv), packed, f16_bytes(d)], axis=1)


# ---- Q4_K / Q5_K: d, dmin, scales[12], (qh[32]), qs[128] --------------------------------

def _kx_dequant(b, q):
    n = b.shape[0]
    sc, m = _scale_min_k4(b[:, 4:16])
    dl = (f16_field(b, 0) * sc.astype(F))[:, :, None]
    ml = (f16_field(b, 2) * m.astype(F))[:, :, None]
    out = q.astype(F)
    out *= dl
    out -= ml
    return out.reshape(n, QK_K)


def _nibble_pairs(qs: np.ndarray) -> np.ndarray:
    """``[n, 128]`` bytes -> ``[n, 8, 32]`` low-4-bit codes: sub-block 2c is the low nibbles
    of bytes 32c..32c+31, sub-block 2c+1 their high nibbles."""
    n = qs.shape[0]
    q = qs.reshape(n, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    return (q & 0x0F).reshape(n, 8, 32)


@quiet_decode
def dequant_q4_k(blocks):
    b = check_blocks("Q4_K", blocks, 144)
    return _kx_dequant(b, _nibble_pairs(b[:, 16:]))


@quiet_decode
def dequant_q5_k(blocks):
    b = check_blocks("Q5_K", blocks, 176)
    high = (b[:, None, 16:48] >> _BITS8) & 1
    return _kx_dequant(b, _nibble_pairs(b[:, 48:]) | (high << 4))


def _kx_quant(x, nmax, rmin, nstep):
    """Q4_K/Q5_K's shared reference: (d, dmin, packed scales, codes [n, 8, 32])."""
    n = x.shape[0]
    sub = x.reshape(n * 8, 32)
    av_x = np.sqrt(seq_sum(sub * sub) / F(32))
    scale, the_min, lv = make_qkx2(sub, av_x[:, None] + np.abs(sub), nmax, rmin, 0.1,
                                   nstep, False)
    scales, mins = scale.reshape(n, 8), the_min.reshape(n, 8)
    max_scale, max_min = _positive_max(scales), _positive_max(mins)
    inv_s = np.where(max_scale > 0, F(63) / max_scale, F(0))[:, None]
    inv_m = np.where(max_min > 0, F(63) / max_min, F(0))[:, None]
    ls = np.minimum(nearest_int(inv_s * scales) & 0xFF, 63)
    lm = np.minimum(nearest_int(inv_m * mins) & 0xFF, 63)
    packed = _pack_scale_min_k4(ls, lm)
    d, dmin = (max_scale / F(63))[:, None], (max_min / F(63))[:, None]
    sc, m = _scale_min_k4(packed)
    dq = _f16_round(d[:, 0])[:, None] * sc.astype(F)
    mq = _f16_round(dmin[:, 0])[:, None] * m.astype(F)
    lv = _requant(sub, dq.reshape(-1), 0, nmax, lv, mq.reshape(-1))
    return d, dmin, packed, lv.reshape(n, 8, 32)


def _join_pairs(lv: np.ndarray) -> np.ndarray:
    """Inverse of ``_nibble_pairs``."""
    p = (lv & 0x0F).reshape(-1, 4, 2, 32)
    return (p[:, :, 0] | (p[:, :, 1] << 4)).reshape(-1, 128)


@_chunked
@quiet
def quant_q4_k(x):
    x = check_values("Q4_K", x, QK_K)
    d, dmin, packed, lv = _kx_quant(x, 15, -1.0, 20)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), packed, _join_pairs(lv)], axis=1)


@_chunked
@quiet
def quant_q5_k(x):
    x = check_values("Q5_K", x, QK_K)
    d, dmin, packed, lv = _kx_quant(x, 31, -0.5, 15)
    qh = np.bitwise_or.reduce((lv >> 4) << _BITS8, axis=1)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), packed, qh, _join_pairs(lv)],
                          axis=1)


# ---- Q6_K: ql[128], qh[64], scales[16] (i8), d ------------------------------------------

@quiet_decode
def dequant_q6_k(blocks):
    b = check_blocks("Q6_K", blocks, 210)
    n = b.shape[0]
    ql = b[:, :128].reshape(n, 2, 2, 32)
    low = np.concatenate([ql & 0x0F, ql >> 4], axis=2)
    high = (b[:, 128:192].reshape(n, 2, 1, 32) >> _SHIFT2) & 3
    q = (low | (high << 4)).astype(np.int8) - np.int8(32)
    dl = (f16_field(b, 208) * b[:, 192:208].view(np.int8).astype(F))[:, :, None]
    out = q.reshape(n, 16, 16).astype(F)
    out *= dl
    return out.reshape(n, QK_K)


@_chunked
@quiet
def quant_q6_k(x):
    x = check_values("Q6_K", x, QK_K)
    n = x.shape[0]
    sub = x.reshape(n * 16, 16)
    scale, lv = make_qx(sub, 32)
    scales = scale.reshape(n, 16)
    i = np.abs(scales).argmax(axis=1)[:, None]
    max_scale = np.take_along_axis(scales, i, axis=1)[:, 0]
    zero = np.abs(max_scale) < GROUP_MAX_EPS
    iscale = F(-128) / max_scale
    d = (F(1) / iscale)[:, None]
    sc = _wrap_i8(np.minimum(nearest_int(iscale[:, None] * scales), 127)).astype(np.int8)
    dq = _f16_round(d[:, 0])[:, None] * sc.astype(F)
    lv = _requant(sub, dq.reshape(-1), -32, 31, lv).reshape(n, 2, 4, 32)
    ql = np.concatenate([(lv[:, :, 0] & 0x0F) | ((lv[:, :, 2] & 0x0F) << 4),
                         (lv[:, :, 1] & 0x0F) | ((lv[:, :, 3] & 0x0F) << 4)], axis=2)
    qh = np.bitwise_or.reduce((lv >> 4) << _SHIFT2, axis=2)
    out = np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8),
                          f16_bytes(d)], axis=1)
    out[zero] = 0
    return out


# ---- Q8_K: d (f32), qs[256] (i8), bsums[16] (i16) ---------------------------------------

@quiet_decode
def dequant_q8_k(blocks):
    b = check_blocks("Q8_K", blocks, 292)
    d = np.ascontiguousarray(b[:, :4]).view("<f4").astype(F)
    return d * b[:, 4:260].view(np.int8).astype(F)


@quiet
def quant_q8_k(x):
    x = check_values("Q8_K", x, QK_K)
    n = x.shape[0]
    i = np.abs(x).argmax(axis=1)[:, None]
    mx = np.take_along_axis(x, i, axis=1)
    zero = mx[:, 0] == 0
    iscale = F(-127) / mx
    q = np.minimum(nearest_int(iscale * x), 127).astype(np.int8)
    bsums = q.reshape(n, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
    d = (F(1) / iscale).astype("<f4")
    out = np.concatenate([d.view(np.uint8).reshape(n, 4), q.view(np.uint8),
                          bsums.astype("<i2").view(np.uint8).reshape(n, 32)], axis=1)
    out[zero] = 0
    return out


def _reg(name, nbytes, deq, qnt, rlx, ggml, gpu, layout, doc):
    register(SchemeDef(name=name, block_size=QK_K, block_bytes=nbytes, dequantize=deq,
                       quantize=qnt, rlx=rlx, ggml_type=ggml, gpu_id=gpu,
                       quantize_source="llama.cpp", layout=layout, doc=doc))


_REF = (" The quantizer is llama.cpp's reference: per sub-block fit, then the sub-block "
        "scales are quantized against the f16 super-scale and every code is recomputed "
        "from the stored scales.")
_CRUMBS = "qs[64]    u8    2-bit codes: element 128h+32j+l in bits 2j..2j+1 of byte 32h+l"
_KS = ("scales[12] u8   8 6-bit scales and 8 6-bit mins: bytes 0-3 scales 0-3, 4-7 mins "
       "0-3 (low 6 bits; top 2 bits extend scale/min 4-7), 8-11 low nibble scale 4-7, high "
       "nibble min 4-7")
_NIB = ("qs[128]   u8    4-bit codes: sub-block 2c in the low nibbles of bytes 32c..32c+31, "
        "2c+1 in the high")

_reg("Q2_K", 84, dequant_q2_k, quant_q2_k, "GgufQ2K", 10, 4,
     "scales[16] u8   per 16 elements: low nibble scale, high nibble min\n" + _CRUMBS
     + "\nd         f16   super-scale of the scales\ndmin      f16   super-scale of the mins",
     "2-bit with 16 sub-blocks of 16: w = d*(sc & 15)*q - dmin*(sc >> 4), q in 0..3. The "
     "sub-block fit is make_qkx2_quants (weights |x|, mean absolute error, 16 trial "
     "scales)." + _REF)
_reg("Q3_K", 110, dequant_q3_k, quant_q3_k, "GgufQ3K", 11, 5,
     "hmask[32] u8    bit 4h+j of byte 16s+l: bit 2 of element 128h+32j+16s+l\n" + _CRUMBS
     + " (low 2 bits)\nscales[12] u8   16 6-bit scales (+32): scale i has low 4 bits in "
     "nibble i//8 of byte i%8, high 2 bits at bit 2*(i//4) of byte 8+i%4\nd         f16   "
     "super-scale",
     "3-bit with 16 sub-blocks of 16: w = d*(sc - 32)*(q - 4), q in 0..7 where a CLEAR "
     "hmask bit subtracts 4. The sub-block fit is make_q3_quants (x*x-weighted, five "
     "passes of per-element refinement)." + _REF)
_reg("Q4_K", 144, dequant_q4_k, quant_q4_k, "GgufQ4K", 12, 0,
     "d         f16   super-scale of the scales\ndmin      f16   super-scale of the mins\n"
     + _KS + "\n" + _NIB,
     "4-bit with 8 sub-blocks of 32: w = d*sc*q - dmin*m, q in 0..15, sc and m 6-bit. The "
     "sub-block fit is make_qkx2_quants (weights sqrt(mean x^2) + |x|, squared error, 21 "
     "trial scales)." + _REF)
_reg("Q5_K", 176, dequant_q5_k, quant_q5_k, "GgufQ5K", 13, 1,
     "d         f16   super-scale of the scales\ndmin      f16   super-scale of the mins\n"
     + _KS + "\nqh[32]    u8    bit g of byte l: bit 4 of element 32g+l\n" + _NIB
     + " (low 4 bits)",
     "5-bit with 8 sub-blocks of 32: w = d*sc*q - dmin*m, q in 0..31. As Q4_K with 16 "
     "trial scales; bit 4 of each code lives in the plane qh." + _REF)
_reg("Q6_K", 210, dequant_q6_k, quant_q6_k, "GgufQ6K", 14, 2,
     "ql[128]   u8    low 4 bits: element 128h+32t+l in nibble t//2 of byte 64h+32(t%2)+l\n"
     "qh[64]    u8    high 2 bits: element 128h+32t+l in bits 2t of byte 32h+l\n"
     "scales[16] i8   per 16 elements\nd         f16   super-scale",
     "6-bit with 16 sub-blocks of 16: w = d*sc*(q - 32), q in 0..63, sc signed 8-bit. "
     "The sub-block fit is make_qx_quants (x*x-weighted, 19 trial scales); an all-zero "
     "super-block is all zero bytes." + _REF)
_reg("Q8_K", 292, dequant_q8_k, quant_q8_k, "GgufQ8K", 15, 3,
     "d         f32   scale\nqs[256]   i8    element j\nbsums[16] i16   sum of qs[16i..16i+15]",
     "8-bit with one f32 scale: w = d*q. The quantizer (llama.cpp's reference, which "
     "llama.cpp uses for activations) takes the element of largest "
     "magnitude, max (first on ties), codes nearest_int(-127*x/max) (half to even, at most "
     "127) and stores d = 1/(-127/max) and the sums of each 16 codes (used by dot "
     "products); an all-zero block is all zero bytes. RLX's QuantScheme doc says 276 bytes; "
     "its gguf_block_bytes and ggml say 292, which is used.")
