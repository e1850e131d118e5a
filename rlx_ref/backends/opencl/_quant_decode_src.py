"""OpenCL C decoders of the GGUF block formats: one inline function per scheme that decodes
one 32-element sub-block of a ``__global const uchar*`` block into two ``float16`` vectors.

Every scheme's block is a whole number of 32-element sub-blocks (1 for the 32-element
formats, 8 for the 256-element ones), so the kernels walk a weight in sub-blocks:
``rlx_qd_<NAME>(b, s, &w0, &w1)`` writes elements ``32s .. 32s+15`` of the block at ``b``
into ``w0`` and ``32s+16 .. 32s+31`` into ``w1``. Each decoder does the format's float
operations in the format's order, one rounding each (products of an f32 scale and a small
integer, then the min subtracted or added), and turns off contraction so a compiler cannot
fuse them: a decoded weight is bit for bit what the scheme's reference decoder gives. f16
fields are read with ``vload_half`` (exact); their offsets are even within a block and every
f16-carrying block has an even byte size, so they stay 2-byte aligned.

Layouts are the GGUF formats' (ggml's ``block_*`` structs); the integer value tables
(IQ4_NL's non-linear levels, MXFP4's doubled e2m1 values) are data defined by the formats.
Functions sit behind include guards: one program may hold several kernels of one scheme.
"""
from __future__ import annotations

from dataclasses import dataclass

_COMMON = """
#ifndef RLX_QD_COMMON
#define RLX_QD_COMMON
RLX_INLINE uint rlx_qd_u32(__global const uchar* p) {   /* little-endian, any alignment */
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}
RLX_INLINE float rlx_qd_hsum(float16 v) {
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}
#define RLX_QD_IOTA ((uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define RLX_QD_LO(q) convert_int16((q) & (uchar)15)
#define RLX_QD_HI(q) convert_int16((q) >> (uchar)4)
/* the two halves of a 32-byte run of quants */
#define RLX_QD_RUN(p, a, b) const uchar16 a = vload16(0, (p)), b = vload16(1, (p))
/* lane i of a vector of per-sub-block scales: selects, which fold to the lane when i is a
   constant (a private array in between kept the compiler from sharing one block's scale
   work among its sub-blocks) */
#define RLX_QD_SEL8(v, i) ((i) < 4 ? ((i) < 2 ? ((i) == 0 ? (v).s0 : (v).s1) \
                                             : ((i) == 2 ? (v).s2 : (v).s3)) \
                                   : ((i) < 6 ? ((i) == 4 ? (v).s4 : (v).s5) \
                                             : ((i) == 6 ? (v).s6 : (v).s7)))
#define RLX_QD_LANE16(v, i, out) \
    { out = (i) < 8 ? RLX_QD_SEL8((v).lo, (i)) : RLX_QD_SEL8((v).hi, (i) - 8); }
#define RLX_QD_LANE8(v, i, out) { out = RLX_QD_SEL8((v), (i)); }
#endif
"""

# An f16 field as float. vload_half is exact everywhere; on a CPU device it is a call-like
# sequence of about 17 scalar instructions (PoCL has no F16C path), a third of a Q4_0 block's
# decode, so CPU-style kernels take the same value from integer operations: normal and
# infinite/NaN halves rebias the exponent, subnormals are m·2^-24 (exact in float).
_HALF = {False: """
RLX_INLINE float rlx_qd_half(__global const uchar* p) {
    return vload_half(0, (__global const half*)p);
}
""", True: """
RLX_INLINE float rlx_qd_half(__global const uchar* p) {
    const uint h = *(__global const ushort*)p;
    const uint m = h & 0x7fffu;
    const uint nb = (m << 13) + (112u << 23);
    const uint bits = m < 0x400u ? as_uint((float)m * 0x1p-24f)
                                 : (m >= 0x7c00u ? nb + (112u << 23) : nb);
    return as_float(bits | ((h & 0x8000u) << 16));
}
"""}

# Each body decodes sub-block ``s`` of block ``b`` into ``*w0`` and ``*w1``.
_BODIES = {
    "Q4_0": (32, 18, """
    const float d = rlx_qd_half(b);
    const uchar16 q = vload16(0, b + 2);
    *w0 = d * convert_float16(RLX_QD_LO(q) - 8);
    *w1 = d * convert_float16(RLX_QD_HI(q) - 8);
"""),
    "Q4_1": (32, 20, """
    const float d = rlx_qd_half(b), m = rlx_qd_half(b + 2);
    const uchar16 q = vload16(0, b + 4);
    *w0 = d * convert_float16(RLX_QD_LO(q)) + m;
    *w1 = d * convert_float16(RLX_QD_HI(q)) + m;
"""),
    "Q5_0": (32, 22, """
    const float d = rlx_qd_half(b);
    const uint16 h = (uint16)rlx_qd_u32(b + 2);
    const uchar16 q = vload16(0, b + 6);
    const int16 h0 = convert_int16((h >> RLX_QD_IOTA) & 1u) << 4;
    const int16 h1 = convert_int16((h >> (RLX_QD_IOTA + 16u)) & 1u) << 4;
    *w0 = d * convert_float16((RLX_QD_LO(q) | h0) - 16);
    *w1 = d * convert_float16((RLX_QD_HI(q) | h1) - 16);
"""),
    "Q5_1": (32, 24, """
    const float d = rlx_qd_half(b), m = rlx_qd_half(b + 2);
    const uint16 h = (uint16)rlx_qd_u32(b + 4);
    const uchar16 q = vload16(0, b + 8);
    const int16 h0 = convert_int16((h >> RLX_QD_IOTA) & 1u) << 4;
    const int16 h1 = convert_int16((h >> (RLX_QD_IOTA + 16u)) & 1u) << 4;
    *w0 = d * convert_float16(RLX_QD_LO(q) | h0) + m;
    *w1 = d * convert_float16(RLX_QD_HI(q) | h1) + m;
"""),
    "Q8_0": (32, 34, """
    const float d = rlx_qd_half(b);
    __global const char* q = (__global const char*)(b + 2);
    *w0 = convert_float16(vload16(0, q)) * d;
    *w1 = convert_float16(vload16(1, q)) * d;
"""),
    # 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit quants, d, dmin;
    # each 128 elements take 32 quant bytes at shifts 0, 2, 4, 6; a scale per 16 elements
    "Q2_K": (256, 84, """
    const float d = rlx_qd_half(b + 80), dm = rlx_qd_half(b + 82);
    const uchar16 sc = vload16(0, b);
    const float16 dl = d * convert_float16(sc & (uchar)15);
    const float16 ml = dm * convert_float16(sc >> (uchar)4);
    float da, db, ma, mb;
    RLX_QD_LANE16(dl, 2 * s, da) RLX_QD_LANE16(dl, 2 * s + 1, db)
    RLX_QD_LANE16(ml, 2 * s, ma) RLX_QD_LANE16(ml, 2 * s + 1, mb)
    RLX_QD_RUN(b + 16 + 32 * (s >> 2), qa, qb);
    const uchar sh = (uchar)(2 * (s & 3));
    *w0 = da * convert_float16((qa >> sh) & (uchar)3) - ma;
    *w1 = db * convert_float16((qb >> sh) & (uchar)3) - mb;
"""),
    # 32 high-bit mask bytes (bit s of byte l: element 32s + l), 64 bytes of 2-bit quants,
    # 12 bytes of 6-bit scales (see rlx_qd_q3s), d; a clear high bit subtracts 4
    "Q3_K": (256, 110, """
    const float16 dl = rlx_qd_half(b + 108) * convert_float16(rlx_qd_q3s(b + 96));
    float da, db;
    RLX_QD_LANE16(dl, 2 * s, da) RLX_QD_LANE16(dl, 2 * s + 1, db)
    RLX_QD_RUN(b + 32 + 32 * (s >> 2), la, lb);
    RLX_QD_RUN(b, ha, hb);
    const uchar sh = (uchar)(2 * (s & 3)), hs = (uchar)s;
    const int16 qa = convert_int16((la >> sh) & (uchar)3)
                     - (convert_int16(((ha >> hs) & (uchar)1) ^ (uchar)1) << 2);
    const int16 qb = convert_int16((lb >> sh) & (uchar)3)
                     - (convert_int16(((hb >> hs) & (uchar)1) ^ (uchar)1) << 2);
    *w0 = da * convert_float16(qa);
    *w1 = db * convert_float16(qb);
"""),
    # d, dmin, 12 bytes of 6-bit (scale, min) pairs per 32 elements, 128 nibble bytes
    "Q4_K": (256, 144, """
    float8 d8, m8;
    rlx_qd_k4sm(b + 4, rlx_qd_half(b), rlx_qd_half(b + 2), &d8, &m8);
    float ds, ms;
    RLX_QD_LANE8(d8, s, ds) RLX_QD_LANE8(m8, s, ms)
    RLX_QD_RUN(b + 16 + 32 * (s >> 1), qa, qb);
    const uchar sh = (uchar)(4 * (s & 1));
    *w0 = ds * convert_float16((qa >> sh) & (uchar)15) - ms;
    *w1 = ds * convert_float16((qb >> sh) & (uchar)15) - ms;
"""),
    # as Q4_K plus 32 high-bit bytes (bit s of byte l: element 32s + l) before the nibbles
    "Q5_K": (256, 176, """
    float8 d8, m8;
    rlx_qd_k4sm(b + 4, rlx_qd_half(b), rlx_qd_half(b + 2), &d8, &m8);
    float ds, ms;
    RLX_QD_LANE8(d8, s, ds) RLX_QD_LANE8(m8, s, ms)
    RLX_QD_RUN(b + 48 + 32 * (s >> 1), qa, qb);
    RLX_QD_RUN(b + 16, ha, hb);
    const uchar sh = (uchar)(4 * (s & 1)), hs = (uchar)s;
    const uchar16 ua = ((qa >> sh) & (uchar)15) | (((ha >> hs) & (uchar)1) << (uchar)4);
    const uchar16 ub = ((qb >> sh) & (uchar)15) | (((hb >> hs) & (uchar)1) << (uchar)4);
    *w0 = ds * convert_float16(ua) - ms;
    *w1 = ds * convert_float16(ub) - ms;
"""),
    # 128 low-nibble bytes, 64 bytes of 2-bit highs, 16 int8 scales (one per 16), d;
    # per 128 elements: 64 ql bytes (low nibbles, then high), 32 qh bytes at shifts 0..6
    "Q6_K": (256, 210, """
    const float16 dl = rlx_qd_half(b + 208)
                       * convert_float16(vload16(0, (__global const char*)(b + 192)));
    float da, db;
    RLX_QD_LANE16(dl, 2 * s, da) RLX_QD_LANE16(dl, 2 * s + 1, db)
    const int h = s >> 2, r = s & 3;
    RLX_QD_RUN(b + 64 * h + 32 * (r & 1), la, lb);
    RLX_QD_RUN(b + 128 + 32 * h, ha, hb);
    const uchar ls = (uchar)(4 * (r >> 1)), hs = (uchar)(2 * r);
    const uchar16 ua = ((la >> ls) & (uchar)15) | (((ha >> hs) & (uchar)3) << (uchar)4);
    const uchar16 ub = ((lb >> ls) & (uchar)15) | (((hb >> hs) & (uchar)3) << (uchar)4);
    *w0 = da * convert_float16(convert_int16(ua) - 32);
    *w1 = db * convert_float16(convert_int16(ub) - 32);
"""),
    # f32 d, 256 int8 quants, 16 int16 block sums (not needed to decode)
    "Q8_K": (256, 292, """
    const float d = as_float(rlx_qd_u32(b));
    __global const char* q = (__global const char*)(b + 4 + 32 * s);
    *w0 = d * convert_float16(vload16(0, q));
    *w1 = d * convert_float16(vload16(1, q));
"""),
    "IQ4_NL": (32, 18, """
    const float d = rlx_qd_half(b);
    const uchar16 q = vload16(0, b + 2);
    *w0 = d * convert_float16(rlx_qd_lut(RLX_QD_IQ4, q & (uchar)15));
    *w1 = d * convert_float16(rlx_qd_lut(RLX_QD_IQ4, q >> (uchar)4));
"""),
    # d, 16 high scale bits (2 per 32 elements), 4 bytes of low scale nibbles, 128 bytes
    "IQ4_XS": (256, 136, """
    const uint8 hi = ((uint8)((uint)b[2] | ((uint)b[3] << 8))
                      >> (uint8)(0, 2, 4, 6, 8, 10, 12, 14)) & 3u;
    const uchar4 l4 = vload4(0, b + 4);
    const uchar8 lo = ((uchar8)(l4.s0, l4.s0, l4.s1, l4.s1, l4.s2, l4.s2, l4.s3, l4.s3)
                       >> (uchar8)(0, 4, 0, 4, 0, 4, 0, 4)) & (uchar)15;
    const float8 d8 = rlx_qd_half(b) * convert_float8((convert_int8(lo)
                                                      | convert_int8(hi << 4u)) - 32);
    float dl;
    RLX_QD_LANE8(d8, s, dl)
    const uchar16 q = vload16(0, b + 8 + 16 * s);
    *w0 = dl * convert_float16(rlx_qd_lut(RLX_QD_IQ4, q & (uchar)15));
    *w1 = dl * convert_float16(rlx_qd_lut(RLX_QD_IQ4, q >> (uchar)4));
"""),
    # 48 bytes of 5 base-3 digits each, 4 bytes of 4 digits, d; digit n of byte q is
    # ((q * 3^n mod 256) * 3) >> 8. Elements 0..159: the first 32 bytes, digit n = e / 32;
    # 160..239: the next 16 bytes, digit (e - 160) / 16; 240..255: the last 4 bytes
    "TQ1_0": (256, 54, """
    const float d = rlx_qd_half(b + 52);
    if (s < 5) {
        RLX_QD_RUN(b, qa, qb);
        const uchar p = RLX_QD_POW3(s);
        *w0 = rlx_qd_trit(qa, (uchar16)p, d);
        *w1 = rlx_qd_trit(qb, (uchar16)p, d);
    } else {
        const uchar16 q = vload16(0, b + 32);
        const int n = 2 * (s - 5);
        *w0 = rlx_qd_trit(q, (uchar16)RLX_QD_POW3(n), d);
        if (s < 7) {
            *w1 = rlx_qd_trit(q, (uchar16)RLX_QD_POW3(n + 1), d);
        } else {
            const uchar4 t4 = vload4(0, b + 48);
            const uchar16 t = (uchar16)(t4, t4, t4, t4);
            *w1 = rlx_qd_trit(t, (uchar16)(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9,
                                           27, 27, 27, 27), d);
        }
    }
"""),
    # 64 bytes of 2-bit digits (as Q2_K's quants), d; value = digit - 1
    "TQ2_0": (256, 66, """
    const float d = rlx_qd_half(b + 64);
    RLX_QD_RUN(b + 32 * (s >> 2), qa, qb);
    const uchar sh = (uchar)(2 * (s & 3));
    *w0 = d * convert_float16(convert_int16((qa >> sh) & (uchar)3) - 1);
    *w1 = d * convert_float16(convert_int16((qb >> sh) & (uchar)3) - 1);
"""),
    # an E8M0 exponent byte, then 16 bytes of e2m1 nibbles; the table holds doubled values,
    # so the scale is half of 2^(e - 127)
    "MXFP4": (32, 17, """
    const uint e = b[0];
    const float d = as_float(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
    const uchar16 q = vload16(0, b + 1);
    *w0 = d * convert_float16(rlx_qd_lut(RLX_QD_MXFP4, q & (uchar)15));
    *w1 = d * convert_float16(rlx_qd_lut(RLX_QD_MXFP4, q >> (uchar)4));
"""),
}

# value tables the formats define (ggml's kvalues_iq4nl, and e2m1 doubled for MXFP4)
_IQ4 = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
_MXFP4 = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def _packed(values) -> str:
    """16 signed bytes as a uint4 literal, 4 little-endian bytes per component."""
    raw = bytes(v & 0xFF for v in values)
    words = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4)]
    return "((uint4)(" + ", ".join(f"0x{w:08x}u" for w in words) + "))"


# helpers some decoders share (each behind its own guard)
_HELPERS = {
    "Q3_K": ("RLX_QD_Q3S", """
RLX_INLINE int16 rlx_qd_q3s(__global const uchar* p) {
    /* the 16 6-bit scales: low 4 bits from bytes 0..7 (low nibbles, then high), high 2
       bits of scale i from byte 8 + i % 4 at shift 2 * (i / 4); stored with a bias of 32 */
    const uchar8 l = vload8(0, p);
    const uchar4 h = vload4(0, p + 8);
    const uchar16 lo = (uchar16)(l & (uchar)15, l >> (uchar)4);
    const uchar16 hi = (uchar16)(h, h >> (uchar)2, h >> (uchar)4, h >> (uchar)6) & (uchar)3;
    return convert_int16(lo | (hi << (uchar)4)) - 32;
}
"""),
    "Q4_K": ("RLX_QD_K4SM", """
RLX_INLINE void rlx_qd_k4sm(__global const uchar* p, float d, float dm, float8* ds,
                            float8* ms) {
    /* the 8 6-bit (scale, min) pairs: bytes 0..3 scales and 4..7 mins of sub-blocks 0..3,
       whose top 2 bits extend 4..7's; bytes 8..11 the low 4 bits of 4..7's (scale low,
       min high nibble) */
    const uchar4 a = vload4(0, p), m = vload4(1, p), h = vload4(2, p);
    const uchar8 sc = (uchar8)(a & (uchar)63, (h & (uchar)15) | ((a >> (uchar)6) << (uchar)4));
    const uchar8 mn = (uchar8)(m & (uchar)63, (h >> (uchar)4) | ((m >> (uchar)6) << (uchar)4));
    *ds = d * convert_float8(sc);
    *ms = dm * convert_float8(mn);
}
"""),
    "IQ4": ("RLX_QD_IQ4_TAB", f"""
/* IQ4_NL's 16 levels {_IQ4}, as little-endian bytes */
#define RLX_QD_IQ4 {_packed(_IQ4)}
"""),
    "LUT": ("RLX_QD_LUT", """
RLX_INLINE int16 rlx_qd_lut(uint4 tab, uchar16 i) {
    /* entry i of 16 signed bytes packed in 4 uints: select the uint by the two high bits
       of i (select() reads each mask lane's top bit), then shift its byte to the top and
       back down with the sign (a vector shuffle by a variable index is slow on CPUs) */
    const uint16 u = convert_uint16(i);
    const uint16 lo = select((uint16)tab.x, (uint16)tab.y, u << 29);
    const uint16 hi = select((uint16)tab.z, (uint16)tab.w, u << 29);
    const uint16 t = select(lo, hi, u << 28);
    return as_int16(t << (24u - ((u & 3u) << 3))) >> 24;
}
"""),
    "TQ": ("RLX_QD_TRIT", """
#define RLX_QD_POW3(n) ((uchar)((n) == 0 ? 1 : (n) == 1 ? 3 : (n) == 2 ? 9 : (n) == 3 ? 27 : 81))
RLX_INLINE float16 rlx_qd_trit(uchar16 q, uchar16 p, float d) {
    const ushort16 t = convert_ushort16(q * p);        /* uchar product: mod 256 */
    return d * convert_float16(convert_int16((t * (ushort)3) >> (ushort)8) - 1);
}
"""),
    "MXFP4": ("RLX_QD_MXFP4_TAB", f"""
/* MXFP4's e2m1 values doubled {_MXFP4}, as little-endian bytes */
#define RLX_QD_MXFP4 {_packed(_MXFP4)}
"""),
}
_NEEDS = {"Q3_K": ("Q3_K",), "Q4_K": ("Q4_K",), "Q5_K": ("Q4_K",), "IQ4_NL": ("IQ4", "LUT"),
          "IQ4_XS": ("IQ4", "LUT"), "TQ1_0": ("TQ",), "MXFP4": ("MXFP4", "LUT")}


@dataclass(frozen=True)
class Decoder:
    """The OpenCL decoder of one GGUF scheme: the block geometry it is written for and
    its C function ``fn``."""

    name: str
    block_size: int
    block_bytes: int
    fn: str

    @property
    def sub_blocks(self) -> int:
        return self.block_size // 32


DECODERS = {name: Decoder(name, bs, bb, f"rlx_qd_{name}") for name, (bs, bb, _) in
            _BODIES.items()}


def _guarded(guard: str, text: str) -> str:
    return f"#ifndef {guard}\n#define {guard}\n{text.strip()}\n#endif\n"


def decode_source(name: str, soft_half: bool = False) -> str:
    """The C source that defines ``rlx_qd_<name>`` and what it uses (include-guarded);
    ``soft_half``: f16 fields by integer operations (CPU-style kernels; every kernel of one
    program must agree, as the first definition is the one kept)."""
    bs, bb, body = _BODIES[name]
    parts = [_COMMON, _guarded("RLX_QD_HALF", _HALF[bool(soft_half)])]
    for need in _NEEDS.get(name, ()):
        parts.append(_guarded(*_HELPERS[need]))
    fn = (f"RLX_INLINE void rlx_qd_{name}(__global const uchar* b, const int s, "
          f"float16* w0, float16* w1)\n{{\n"
          "    #pragma OPENCL FP_CONTRACT OFF\n"      # the format rounds each operation
          f"    (void)s;{body}}}\n")
    parts.append(_guarded(f"RLX_QD_FN_{name}", f"/* {name}: {bs} elements in {bb} bytes */\n"
                          + fn))
    return "".join(parts)
