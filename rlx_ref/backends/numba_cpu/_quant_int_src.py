"""Numba sources of the integer quant ops (Quantize, Dequantize, QMatMul, QConv2d) and the
f32 MoE and LoRA products (GroupedMatMul, LoraMatMul).

The integer ops are bit-exact with the oracle (``rlx_ref/ops/_quant_int.py``): sums are
exact int64 (a wrapping sum keeps the oracle's bits), the accumulator is rounded to f32
once, each product is one f32 rounding (no fastmath, so nothing contracts), ``round`` is
half away from zero as Rust's ``f32::round`` (taken in f64, where ``|v| + 0.5`` is exact),
and the saturations are spelled out: NaN gives 0, then i32, then the zero point and i8.
Quantize multiplies by reciprocals the host rounded to f32, as the oracle does.
"""
from __future__ import annotations

_REQUANT = '''
_J = dict(cache=True, nogil=True)


@njit(inline="always", **_J)
def _to_i8(v, zp):
    # f32 value -> i8: round half away from zero, NaN -> 0, saturate to i32, add zp, clamp
    if v != v:
        return max(-128, min(127, zp))
    a = np.floor(abs(np.float64(v)) + 0.5)
    r = -a if v < 0 else a
    r = max(-2147483648.0, min(2147483647.0, r))
    return max(-128, min(127, np.int64(r) + zp))


@njit(inline="always", **_J)
def _requant(acc, mult, zp):
    # RLX's requantize: the exact sum rounded to f32 once, one f32 product
    return _to_i8(np.float32(acc) * mult, zp)
'''

_AFFINE = '''
@njit(parallel=True, **_J)
def qi_quantize(out, x, inv, zp, inner, nc, par):
    n = x.size
    for t in prange(par):
        for i in range(t * n // par, (t + 1) * n // par):
            c = (i // inner) % nc
            out[i] = _to_i8(x[i] * inv[c], zp[c])


@njit(parallel=True, **_J)
def qi_dequantize(out, q, sc, zp, inner, nc, par):
    n = q.size
    for t in prange(par):
        for i in range(t * n // par, (t + 1) * n // par):
            c = (i // inner) % nc
            # the integer difference is exact; its f32 value is part of the definition
            out[i] = np.float32(np.int64(q[i]) - zp[c]) * sc[c]
'''

_QMATMUL = '''
@njit(parallel=True, **_J)
def qi_qmatmul(out, x, w, bias, xzp, wzp, mult, ozp):
    m, k = x.shape
    n = w.shape[1]
    for i in prange(m):
        acc = np.empty(n, np.int64)
        for j in range(n):
            acc[j] = bias[j]
        for kk in range(k):
            xv = np.int64(x[i, kk]) - xzp
            for j in range(n):
                acc[j] += xv * (np.int64(w[kk, j]) - wzp)
        for j in range(n):
            out[i, j] = _requant(acc[j], mult, ozp)
'''

_QCONV = '''
@njit(parallel=True, **_J)
def qi_qconv2d(out, x, w, bias, geo, xzp, wzp, mult, ozp):
    # geo: stride (2), padding (2), dilation (2), groups
    b_n, ci_n, H, W = x.shape
    co_n, cg, kh, kw = w.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    per = co_n // geo[6]
    for bc in prange(b_n * co_n):
        b = bc // co_n
        co = bc % co_n
        c0 = (co // per) * cg
        for ho in range(ho_n):
            for wo in range(wo_n):
                acc = np.int64(bias[co])
                for c in range(cg):
                    for i in range(kh):
                        ih = ho * geo[0] + i * geo[4] - geo[2]
                        for j in range(kw):
                            iw = wo * geo[1] + j * geo[5] - geo[3]
                            inside = ih >= 0 and ih < H and iw >= 0 and iw < W
                            # a tap in the padding adds nothing (as if it held x_zp)
                            xv = np.int64(x[b, c0 + c, ih, iw]) - xzp if inside else 0
                            acc += xv * (np.int64(w[co, c, i, j]) - wzp)
                out[b, co, ho, wo] = _requant(acc, mult, ozp)
'''

_GROUPED = '''
@njit(parallel=True, cache=True, nogil=True)
def qi_grouped_mm(out, x, w, ids):
    # out[i] = x[i] @ w[ids[i]]; ids were checked on the host (all in [0, E))
    m, k = x.shape
    n = w.shape[2]
    for i in prange(m):
        e = ids[i]
        row = out[i]
        row[:] = 0
        for kk in range(k):
            xv = x[i, kk]
            we = w[e, kk]
            for j in range(n):
                row[j] += xv * we[j]
'''

_LORA = '''
@njit(parallel=True, cache=True, nogil=True)
def qi_lora(out, x, w, a, b, scale):
    # out = x @ w + (scale * (x @ a)) @ b, row by row (the rank-R product scaled first)
    m, k = x.shape
    n = w.shape[1]
    r = a.shape[1]
    for i in prange(m):
        t = np.zeros(r, np.float32)
        z = np.zeros(n, np.float32)
        y = out[i]
        y[:] = 0
        for kk in range(k):
            xv = x[i, kk]
            for j in range(r):
                t[j] += xv * a[kk, j]
            for j in range(n):
                y[j] += xv * w[kk, j]
        for j in range(r):
            t[j] = t[j] * scale
        for jr in range(r):
            tv = t[jr]
            for j in range(n):
                z[j] += tv * b[jr, j]
        for j in range(n):
            y[j] = y[j] + z[j]
'''

SOURCES = {"qi_quantize": _REQUANT + _AFFINE, "qi_dequantize": _REQUANT + _AFFINE,
           "qi_qmatmul": _REQUANT + _QMATMUL, "qi_qconv2d": _REQUANT + _QCONV,
           "qi_grouped_mm": _GROUPED, "qi_lora": _LORA}
