"""OpenCL C source of the 4-operand DequantMatMul: ``out[m, n] = x[m, k] · W[k, n]`` with
each weight decoded from ``w_q``, ``scale`` and ``zp`` inside the K loop.

The decode is the scheme records' own (``rlx_ref.quant.linear.unpack_linear``), bit for
bit: codes at the flat index ``e = p·n + j`` of the row-major ``[k, n]`` weight (4-bit
codes: byte ``e >> 1``, low nibble for even e), scales per block of ``bs`` rows along k
(``[ceil(k/bs), n]``; FP8: one block spanning k, a scale per column), every f32 operation
in the record's order with one rounding each (contraction off). FP8 and E2M1 values are
built from their bits: E4M3 is OCP's (no infinities, S.1111.111 NaN; as an NVFP4 block
scale its NaN codes read as a signed zero), E5M2 IEEE-like. A work-item owns one column
and up to QL_ROWS x rows, so each weight is decoded once per QL_ROWS rows; a block's
scale is loaded once per block.
"""
from __future__ import annotations

import hashlib

ROWS = 4                    # x rows per work-item

_COMMON = """
#ifndef RLX_QL_COMMON
#define RLX_QL_COMMON
RLX_INLINE float rlx_ql_e4m3(uint c) {          /* OCP E4M3, NaN kept */
    const uint s = (c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
    if (e == 15u && m == 7u) return as_float(s | 0x7fc00000u);
    if (e == 0u) return as_float(s | as_uint((float)m * 0x1p-9f));
    return as_float(s | ((e + 120u) << 23) | (m << 20));
}
RLX_INLINE float rlx_ql_e4m3_scale(uint c) {    /* an NVFP4 block scale: NaN reads as 0 */
    const uint s = (c & 0x80u) << 24;
    return (c & 0x7fu) == 0x7fu ? as_float(s) : rlx_ql_e4m3(c);
}
RLX_INLINE float rlx_ql_e5m2(uint c) {          /* E5M2: infinities and NaN at e = 31 */
    const uint s = (c & 0x80u) << 24, e = (c >> 2) & 31u, m = c & 3u;
    if (e == 31u) return as_float(s | (m ? 0x7fc00000u : 0x7f800000u));
    if (e == 0u) return as_float(s | as_uint((float)m * 0x1p-16f));
    return as_float(s | ((e + 112u) << 23) | (m << 21));
}
RLX_INLINE float rlx_ql_e2m1(uint c) {          /* E2M1: 0 .5 1 1.5 2 3 4 6, sign bit 3 */
    const uint s = (c & 8u) << 28, e = (c >> 1) & 3u, m = c & 1u;
    const uint mag = e ? ((e + 126u) << 23) | (m << 22) : (m ? 0x3f000000u : 0u);
    return as_float(s | mag);
}
RLX_INLINE int rlx_ql_nibble(__global const uchar* wq, long e) {
    const uint b = wq[e >> 1];
    return (int)((e & 1) ? b >> 4 : b & 15u);
}
#endif
"""

_SCF = "((__global const float*)sc)"
# per scheme: (the block's side values, the element's code, the weight)
_SCHEMES = {
    "Int8Block": (f"const float s = {_SCF}[si];",
                  "const int c = ((__global const char*)wq)[e];", "(float)c * s"),
    "Int8BlockAsym": (f"const float s = {_SCF}[si], z = zp[si];",
                      "const int c = ((__global const char*)wq)[e];", "((float)c - z) * s"),
    "Int4Block": (f"const float s = {_SCF}[si];",
                  "const int u = rlx_ql_nibble(wq, e), c = u > 7 ? u - 16 : u;",
                  "(float)c * s"),
    "Fp8E4m3": (f"const float s = {_SCF}[si];", "const uint c = wq[e];",
                "rlx_ql_e4m3(c) * s"),
    "Fp8E5m2": (f"const float s = {_SCF}[si];", "const uint c = wq[e];",
                "rlx_ql_e5m2(c) * s"),
    "Nvfp4Block": ("const float s = rlx_ql_e4m3_scale(sc[si]), g = zp[0];",
                   "const uint c = (uint)rlx_ql_nibble(wq, e);", "(rlx_ql_e2m1(c) * s) * g"),
}
SCHEMES = tuple(_SCHEMES)

_KERNEL = """
__kernel void KNAME(__global float* out, __global const float* x, __global const uchar* wq,
                    __global const uchar* sc, __global const float* zp, const int m,
                    const int n, const int k, const int bs)
{
    #pragma OPENCL FP_CONTRACT OFF
    const int j = get_global_id(0), mb = get_global_id(1) * QL_ROWS;
    if (j >= n || mb >= m) return;
$xrows
    float $acc;
    for (int p0 = 0, bi = 0; p0 < k; p0 += bs, bi++) {
        const long si = (long)bi * n + j;
        $block
        const int p1 = min(p0 + bs, k);
        for (int p = p0; p < p1; p++) {
            const long e = (long)p * n + j;
            $code
            const float w = $weight;
$step
        }
    }
$store
}
"""


def linear_source(scheme: str) -> tuple[str, str]:
    """(name, source) of the 4-operand product of ``scheme`` (a key of SCHEMES)."""
    block, code, weight = _SCHEMES[scheme]
    rows = range(ROWS)
    body = (_KERNEL.replace("$xrows", "\n".join(
        f"    __global const float* x{r} = x + (long)min(mb + {r}, m - 1) * k;" for r in rows))
        .replace("$acc", ", ".join(f"a{r} = 0.0f" for r in rows))
        .replace("$block", block).replace("$code", code).replace("$weight", weight)
        .replace("$step", "\n".join(f"            a{r} = fma(x{r}[p], w, a{r});"
                                    for r in rows))
        .replace("$store", "\n".join(f"    if (mb + {r} < m) out[(long)(mb + {r}) * n + j] "
                                     f"= a{r};" for r in rows)))
    full = _COMMON + f"#define QL_ROWS {ROWS}\n" + body + "#undef QL_ROWS\n"
    name = f"qlin_{scheme.lower()}_{hashlib.sha256(full.encode()).hexdigest()[:12]}"
    return name, full.replace("KNAME", name)
