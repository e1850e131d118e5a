"""OpenCL C of Softmax over ``[outer, K, inner]``: the slice max (NaN counted as +inf, so
one max also flags NaN), the sum of ``exp(x - max)``, then the scaling by 1/sum.

A slice whose max is ±inf (all -inf, or holding +inf or NaN) is NaN throughout, as
``x - max`` makes it in the oracle. The CPU kernels keep f32/f64 exps in the output
between the passes (the row is in cache); the GPU kernels and 16-bit outputs compute them
again (storing them would cost a memory round trip, or round them twice). Kernels:
``rows_cpu`` (a row per work-item, ``VW``-wide vectors), ``rows_gpu`` (a row per
work-group, trees in local memory), ``cols`` (a column of a middle-axis softmax per
work-item) and ``cols_cpu`` (blocks of 4·VW columns in vectors).
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._reduce_c import BUFFER, compute_type, load, load_vec, render, store, unroll, vec_defs


def softmax_defs(dt: DType, device) -> dict:
    """Macros of Softmax over ``dt`` on ``device``."""
    ct = compute_type(dt)
    keep = dt in (DType.F32, DType.F64)
    vec = vec_defs(device, ct, {"x": dt}, dt)
    n = int(vec["VW"])
    return {
        "XT": BUFFER[dt], "CT": ct, "CTV": f"{ct}{n}", **vec,
        "LDOV(i)": load_vec(dt, "out", "(i)", ct, n),
        "KEEP_EXP": "1" if keep else "0",
        "LDX(i)": load(dt, "x", "(i)", ct), "LDO(i)": load(dt, "out", "(i)", ct),
        "STO(i, v)": store(dt, "out", "(i)", "(v)"),
    }

_ROWS_CPU = """
__kernel void KNAME(__global XT* out, __global const XT* x, const long rows, const long K) {
    long r = get_global_id(0);
    if (r >= rows) return;
    long lo = r * K, i = 0;
    CT m = -INFINITY;
    CTV m0 = (CTV)(-INFINITY), m1 = m0;
    for (; i + 2 * VW <= K; i += 2 * VW) {
        CTV w0 = LDXV(lo + i), w1 = LDXV(lo + i + VW);
        m0 = fmax(m0, select(w0, (CTV)INFINITY, isnan(w0)));
        m1 = fmax(m1, select(w1, (CTV)INFINITY, isnan(w1)));
    }
    m0 = fmax(m0, m1);
    m = fmax(m, m0.@s);
    for (; i < K; i++) { CT v = LDX(lo + i); m = fmax(m, v != v ? (CT)INFINITY : v); }
    if (isinf(m)) {
        for (i = 0; i < K; i++) STO(lo + i, NAN);
        return;
    }
    CT s = 0;
    i = 0;
    CTV s0 = (CTV)0, s1 = s0;
    for (; i + 2 * VW <= K; i += 2 * VW) {
        CTV e0 = exp(LDXV(lo + i) - m), e1 = exp(LDXV(lo + i + VW) - m);
#if KEEP_EXP
        STOV(lo + i, e0);
        STOV(lo + i + VW, e1);
#endif
        s0 += e0;
        s1 += e1;
    }
    s0 += s1;
    s += s0.@s;
    for (; i < K; i++) {
        CT e = exp(LDX(lo + i) - m);
#if KEEP_EXP
        STO(lo + i, e);
#endif
        s += e;
    }
    CT inv = (CT)1 / s;
    for (i = 0; i + VW <= K; i += VW) {
#if KEEP_EXP
        STOV(lo + i, LDOV(lo + i) * inv);
#else
        STOV(lo + i, exp(LDXV(lo + i) - m) * inv);
#endif
    }
    for (; i < K; i++) {
#if KEEP_EXP
        STO(lo + i, LDO(lo + i) * inv);
#else
        STO(lo + i, exp(LDX(lo + i) - m) * inv);
#endif
    }
}
"""

_ROWS_GPU = """
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void KNAME(__global XT* out, __global const XT* x, const long rows, const long K) {
    __local CT sh[WG];
    long lo = get_group_id(0) * K;
    int l = get_local_id(0);
    CT m = -INFINITY;
    for (long i = l; i < K; i += WG) {
        CT v = LDX(lo + i);
        m = fmax(m, v != v ? (CT)INFINITY : v);
    }
    sh[l] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (l < w) sh[l] = fmax(sh[l], sh[l + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* a row whose max is ±inf ends up NaN through inv; no early return between barriers
       (PoCL miscompiles that even when the whole group takes it) */
    int bad = isinf(m);
    CT s = 0;
    for (long i = l; i < K; i += WG) {
        CT e = exp(LDX(lo + i) - m);
#if KEEP_EXP
        STO(lo + i, e);
#endif
        s += e;
    }
    sh[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (l < w) sh[l] += sh[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    CT inv = bad ? (CT)NAN : (CT)1 / sh[0];
    for (long i = l; i < K; i += WG) {
#if KEEP_EXP
        STO(lo + i, LDO(lo + i) * inv);
#else
        STO(lo + i, exp(LDX(lo + i) - m) * inv);
#endif
    }
}
"""

_COLUMN = """
inline void COLUMN(__global XT* out, __global const XT* x, const long K, const long inner,
                   const long base) {
    CT m = -INFINITY;
    for (long k = 0; k < K; k++) {
        CT v = LDX(base + k * inner);
        m = fmax(m, v != v ? (CT)INFINITY : v);
    }
    if (isinf(m)) {
        for (long k = 0; k < K; k++) STO(base + k * inner, NAN);
        return;
    }
    CT s = 0;
    for (long k = 0; k < K; k++) {
        CT e = exp(LDX(base + k * inner) - m);
#if KEEP_EXP
        STO(base + k * inner, e);
#endif
        s += e;
    }
    CT inv = (CT)1 / s;
    for (long k = 0; k < K; k++) {
#if KEEP_EXP
        STO(base + k * inner, LDO(base + k * inner) * inv);
#else
        STO(base + k * inner, exp(LDX(base + k * inner) - m) * inv);
#endif
    }
}
"""

_COLS = """
__kernel void KNAME(__global XT* out, __global const XT* x, const long outer, const long K,
                    const long inner) {
    long t = get_global_id(0);
    if (t >= outer * inner) return;
    DIVMOD(t, inner, o, i);
    COLUMN(out, x, K, inner, o * K * inner + i);
}
"""

_COLS_CPU = """
__kernel void KNAME(__global XT* out, __global const XT* x, const long outer, const long K,
                    const long inner) {
    long nb = (inner + CB - 1) / CB;
    long t = get_global_id(0);
    if (t >= outer * nb) return;
    DIVMOD(t, nb, o, blk);
    long base = o * K * inner + blk * CB;
    if (blk * CB + CB > inner) {            /* the last, partial block: column by column */
        for (long i = base; i < o * K * inner + inner; i++) COLUMN(out, x, K, inner, i);
        return;
    }
    CTV m@j = (CTV)(-INFINITY);
    for (long p = base; p < base + K * inner; p += inner) {
        CTV w@j = LDXV(p + @o);
        m@j = fmax(m@j, select(w@j, (CTV)INFINITY, isnan(w@j)));
    }
    CTV s@j = (CTV)0;
    for (long p = base; p < base + K * inner; p += inner) {
        CTV e@j = exp(LDXV(p + @o) - m@j);
#if KEEP_EXP
        STOV(p + @o, e@j);
#endif
        s@j += e@j;
    }
    /* a column whose max is ±inf is NaN throughout */
    CTV inv@j = select((CTV)1 / s@j, (CTV)NAN, isinf(m@j));
    for (long p = base; p < base + K * inner; p += inner) {
#if KEEP_EXP
        STOV(p + @o, LDOV(p + @o) * inv@j);
#else
        STOV(p + @o, exp(LDXV(p + @o) - m@j) * inv@j);
#endif
    }
}
"""

_TEMPLATES = {"rows_cpu": _ROWS_CPU, "rows_gpu": _ROWS_GPU, "cols": _COLS,
              "cols_cpu": _COLS_CPU}
COL_VECTORS = 4          # 4·VW columns per block: m, s and the exps fit the registers


def source(kernel: str, dt: DType, device, wg: int = 0) -> tuple[str, str]:
    """(name, source) of the Softmax kernel ``kernel`` for dtype ``dt`` on ``device``."""
    defs = softmax_defs(dt, device)
    text = _TEMPLATES[kernel]
    if kernel in ("rows_gpu", "cols"):  # GPUs: reading x again beats a store and a load
        defs["KEEP_EXP"] = "0"
    if kernel == "rows_gpu":
        defs["WG"] = str(wg)
    if kernel.startswith("cols"):       # the column helper is named after its kernel
        vw = int(defs["VW"])
        defs["CB"] = str(vw * COL_VECTORS)
        text = _COLUMN + unroll(text, COL_VECTORS, vw)
    name, src = render(f"softmax_{kernel}", defs, text)
    return name, src.replace("COLUMN", f"{name}_column")
