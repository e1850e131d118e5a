"""OpenCL C sources of the integer quant ops (Quantize, Dequantize, QMatMul, QConv2d) and
the f32 MoE/LoRA products (GroupedMatMul, LoraMatMul).

The integer ops are bit-exact with the oracle (``rlx_ref/ops/_quant_int.py``): sums are
exact (ulong arithmetic, so even a wrapping sum has the oracle's i64 bits), the
accumulator is rounded to f32 once (``convert_float_rte``), each product is one f32
rounding with contraction off, ``round`` is half away from zero as Rust's ``f32::round``,
and the saturations are spelled out (NaN gives 0, then i32, then the zero point and i8).
Quantize multiplies by reciprocals the host computed in f32 (OpenCL's single-precision
division need not be correctly rounded).
"""
from __future__ import annotations

import hashlib

_REQUANT = """
#ifndef RLX_Q_REQUANT
#define RLX_Q_REQUANT
/* f32 value -> i8: round half away from zero, NaN -> 0, saturate to i32, add zp, clamp */
RLX_INLINE char rlx_q_to_i8(float v, long zp) {
    const float r = round(v);
    long q = r != r ? 0L : convert_long_sat_rtz(r);
    q = clamp(q, -2147483648L, 2147483647L);
    return (char)clamp(q + zp, -128L, 127L);
}
/* i64 accumulator -> i8: RLX's requantize, f32(acc) * mult with one rounding each */
RLX_INLINE char rlx_q_requant(long acc, float mult, long zp) {
    #pragma OPENCL FP_CONTRACT OFF
    const float v = convert_float_rte(acc) * mult;
    return rlx_q_to_i8(v, zp);
}
#endif
"""

_QUANTIZE = """
__kernel void KNAME(__global char* out, __global const float* x, __global const float* inv,
                    __global const long* zp, const long n, const long inner, const long nc)
{
    #pragma OPENCL FP_CONTRACT OFF
    const long i = get_global_id(0);
    if (i >= n) return;
    const long c = (i / inner) % nc;
    out[i] = rlx_q_to_i8(x[i] * inv[c], zp[c]);
}
"""

_DEQUANTIZE = """
__kernel void KNAME(__global float* out, __global const char* q, __global const float* sc,
                    __global const long* zp, const long n, const long inner, const long nc)
{
    #pragma OPENCL FP_CONTRACT OFF
    const long i = get_global_id(0);
    if (i >= n) return;
    const long c = (i / inner) % nc;
    /* the integer difference is exact; its f32 value is part of the definition */
    out[i] = convert_float_rte((long)q[i] - zp[c]) * sc[c];
}
"""

_QMATMUL = """
__kernel void KNAME(__global char* out, __global const char* x, __global const char* w,
                    __global const int* bias, const int m, const int n, const int k,
                    const long xzp, const long wzp, const float mult, const long ozp)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (j >= n || i >= m) return;
    __global const char* xr = x + (long)i * k;
    ulong acc = (ulong)(long)bias[j];        /* ulong: a wrapping sum keeps i64's bits */
    for (int kk = 0; kk < k; kk++)
        acc += (ulong)((long)xr[kk] - xzp) * (ulong)((long)w[(long)kk * n + j] - wzp);
    out[(long)i * n + j] = rlx_q_requant(as_long(acc), mult, ozp);
}
"""

_QCONV = """
__kernel void KNAME(__global char* out, __global const char* x, __global const char* w,
                    __global const int* bias, __global const int* geo, const long total,
                    const long xzp, const long wzp, const float mult, const long ozp)
{
    const long o = get_global_id(0);
    if (o >= total) return;
    /* geo: C_in, H, W, C_out, H_out, W_out, kH, kW, sH, sW, pH, pW, dH, dW, groups */
    const int ci_n = geo[0], H = geo[1], W = geo[2], co_n = geo[3], ho_n = geo[4];
    const int wo_n = geo[5], kh = geo[6], kw = geo[7];
    const int cg = ci_n / geo[14], per = co_n / geo[14];
    const int wo = (int)(o % wo_n), ho = (int)((o / wo_n) % ho_n);
    const int co = (int)((o / ((long)wo_n * ho_n)) % co_n);
    const long b = o / ((long)wo_n * ho_n * co_n);
    const int c0 = (co / per) * cg;
    ulong acc = (ulong)(long)bias[co];
    for (int c = 0; c < cg; c++) {
        __global const char* xc = x + ((b * ci_n + c0 + c) * H) * (long)W;
        __global const char* wc = w + ((long)co * cg + c) * kh * kw;
        for (int i = 0; i < kh; i++) {
            const int ih = ho * geo[8] + i * geo[12] - geo[10];
            for (int jj = 0; jj < kw; jj++) {
                const int iw = wo * geo[9] + jj * geo[13] - geo[11];
                const int inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
                /* a tap in the padding adds nothing (as if the padding held x_zp) */
                const long xv = inside ? (long)xc[(long)ih * W + iw] - xzp : 0L;
                acc += (ulong)xv * (ulong)((long)wc[i * kw + jj] - wzp);
            }
        }
    }
    out[o] = rlx_q_requant(as_long(acc), mult, ozp);
}
"""

_GROUPED = """
__kernel void KNAME(__global float* out, __global const float* x, __global const float* w,
                    __global const int* ids, const int m, const int n, const int k)
{
    const int j = get_global_id(0), i = get_global_id(1);
    if (j >= n || i >= m) return;
    __global const float* xr = x + (long)i * k;
    __global const float* we = w + (long)ids[i] * k * n + j;
    float a = 0.0f;
    for (int kk = 0; kk < k; kk++) a = fma(xr[kk], we[(long)kk * n], a);
    out[(long)i * n + j] = a;
}
"""

_LORA_DOWN = """
__kernel void KNAME(__global float* t, __global const float* x, __global const float* a,
                    const int m, const int r, const int k, const float scale)
{
    #pragma OPENCL FP_CONTRACT OFF
    const int j = get_global_id(0), i = get_global_id(1);
    if (j >= r || i >= m) return;
    __global const float* xr = x + (long)i * k;
    float s = 0.0f;
    for (int kk = 0; kk < k; kk++) s = fma(xr[kk], a[(long)kk * r + j], s);
    t[(long)i * r + j] = s * scale;           /* scaled before it meets B, as RLX */
}
"""

_LORA_UP = """
__kernel void KNAME(__global float* out, __global const float* x, __global const float* w,
                    __global const float* t, __global const float* b, const int m,
                    const int n, const int k, const int r)
{
    #pragma OPENCL FP_CONTRACT OFF
    const int j = get_global_id(0), i = get_global_id(1);
    if (j >= n || i >= m) return;
    __global const float* xr = x + (long)i * k;
    __global const float* tr = t + (long)i * r;
    float y = 0.0f, z = 0.0f;
    for (int kk = 0; kk < k; kk++) y = fma(xr[kk], w[(long)kk * n + j], y);
    for (int kk = 0; kk < r; kk++) z = fma(tr[kk], b[(long)kk * n + j], z);
    out[(long)i * n + j] = y + z;
}
"""

SOURCES = {"quantize": (_QUANTIZE, True), "dequantize": (_DEQUANTIZE, False),
           "qmatmul": (_QMATMUL, True), "qconv2d": (_QCONV, True),
           "grouped_mm": (_GROUPED, False), "lora_down": (_LORA_DOWN, False),
           "lora_up": (_LORA_UP, False)}


def source(which: str) -> tuple[str, str]:
    """(name, source) of kernel ``which`` (a key of SOURCES), named by its text's hash."""
    body, requant = SOURCES[which]
    full = (_REQUANT if requant else "") + body
    name = f"q{which}_{hashlib.sha256(full.encode()).hexdigest()[:12]}"
    return name, full.replace("KNAME", name)
