"""OpenCL C of Reduce (Sum, Mean, Prod, Max, Min) over ``[outer, K, inner]``.

An op is a few macros: ``COMB``/``COMBV`` fold a value (vector) into an accumulator,
``FIN`` finishes it (Mean divides by ``count``), ``IDENT`` starts it. Floats accumulate in
their compute type (float Sum and Mean in ``WIDE``, double, when ``wide``: CPU-style
kernels on a device with fp64), integers in 64 bits (Sum and Prod in ulong, so they wrap without
undefined behaviour, and the store truncates as numpy's do). Max and Min skip NaN
(accumulators start at ∓inf, never NaN) and pick +0 over -0 for Max, -0 for Min, with
one compare-and-select that also vectorizes, so no second pass settles zero signs.

Kernels: ``rows_cpu`` (a contiguous segment per work-item, four 8-lane accumulators, each
one 8-wide vector or two 4-wide halves, so products associate alike on every device),
``rows_gpu`` (a segment per work-group, tree in local memory), ``combine`` (the per-row
partials of segments, in order), ``cols_cpu`` (a block of 32 or 64 adjacent columns per work-item),
``cols_gpu`` (a column per work-item) and ``strided`` (reduced axes that are not adjacent:
offsets computed from the merged runs' sizes and strides).
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ._reduce_c import (
    BUFFER,
    compute_type,
    highest,
    load,
    lowest,
    store,
    template_source,
    vec_defs,
)

ACC_NP = {"float": np.float32, "double": np.float64, "long": np.int64, "ulong": np.uint64}

_FLOAT_MAX = ("(((v) > (a) || ((v) == (a) && !signbit(v))) ? (v) : (a))",
              "select((a), (v), ((v) > (a)) | (((v) == (a)) & ~signbit(v)))")
_FLOAT_MIN = ("(((v) < (a) || ((v) == (a) && signbit(v))) ? (v) : (a))",
              "select((a), (v), ((v) < (a)) | (((v) == (a)) & signbit(v)))")


# The wide accumulator of float sums; the backend's Sum/Mean promise rests on it (a test
# narrows it to float to check that conformance notices).
WIDE = "double"


def fold_defs(op: str, xdt: DType, odt: DType, device, wide: bool = False) -> dict:
    """The macros of Reduce ``op`` reading ``xdt`` and storing ``odt`` on ``device``;
    ``wide``: float Sum and Mean accumulate in ``WIDE``."""
    ct = compute_type(xdt, unsigned=op in ("Sum", "Prod"))
    if wide and xdt.is_float and op in ("Sum", "Mean"):
        ct = WIDE
    if op in ("Sum", "Mean"):
        ident, comb = "0", ("((a) + (v))",) * 2
    elif op == "Prod":
        ident, comb = "1", ("((a) * (v))",) * 2
    elif xdt.is_float:
        ident = lowest(xdt) if op == "Max" else highest(xdt)
        comb = _FLOAT_MAX if op == "Max" else _FLOAT_MIN
    else:
        ident = lowest(xdt) if op == "Max" else highest(xdt)
        comb = (f"{op.lower()}((a), (v))",) * 2
    vec = vec_defs(device, ct, {"x": xdt}, odt)
    return {
        "XT": BUFFER[xdt], "OT": BUFFER[odt], "ACC": ct, "ACCV": f"{ct}{vec['VW']}",
        "IDENT": f"(({ct}){ident})", **vec,
        "LDX(i)": load(xdt, "x", "(i)", ct),
        "STO(i, v)": store(odt, "out", "(i)", "(v)"),
        "COMB(a, v)": comb[0], "COMBV(a, v)": comb[1],
        "FIN(a)": "((a) / (ACC)count)" if op == "Mean" else "(a)",
    }


_ROWS_CPU = """
__kernel void KNAME(__global OT* out, __global const XT* x, __global ACC* part,
                    const long nseg, const long K, const long chunk, const long nchunk,
                    const long count, const int finish) {
    long s = get_global_id(0);
    if (s >= nseg) return;
    DIVMOD(s, nchunk, o, c);
    long lo = o * K + c * chunk;
    long n = min(chunk, K - c * chunk);
    long i = 0;
    ACC a = IDENT;
    ACCV v0_@h = (ACCV)(IDENT), v1_@h = v0_@h, v2_@h = v0_@h, v3_@h = v0_@h;
    for (; i + 32 <= n; i += 32) {     /* four independent chains hide the latency */
        ACCV w0_@h = LDXV(lo + i + @O), w1_@h = LDXV(lo + i + 8 + @O);
        ACCV w2_@h = LDXV(lo + i + 16 + @O), w3_@h = LDXV(lo + i + 24 + @O);
        v0_@h = COMBV(v0_@h, w0_@h); v1_@h = COMBV(v1_@h, w1_@h);
        v2_@h = COMBV(v2_@h, w2_@h); v3_@h = COMBV(v3_@h, w3_@h);
    }
    for (; i + 8 <= n; i += 8) {
        ACCV w_@h = LDXV(lo + i + @O);
        v0_@h = COMBV(v0_@h, w_@h);
    }
    v0_@h = COMBV(v0_@h, v1_@h); v2_@h = COMBV(v2_@h, v3_@h); v0_@h = COMBV(v0_@h, v2_@h);
    a = COMB(a, v0_@h.@s);
    for (; i < n; i++) { ACC v = LDX(lo + i); a = COMB(a, v); }
    if (finish) STO(s, FIN(a)); else part[s] = a;
}
"""

_ROWS_GPU = """
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void KNAME(__global OT* out, __global const XT* x, __global ACC* part,
           const long nseg, const long K, const long chunk, const long nchunk,
           const long count, const int finish) {
    __local ACC sh[WG];
    long s = get_group_id(0);
    int l = get_local_id(0);
    DIVMOD(s, nchunk, o, c);
    long lo = o * K + c * chunk;
    long n = min(chunk, K - c * chunk);
    ACC a = IDENT;
    for (long i = l; i < n; i += WG) { ACC v = LDX(lo + i); a = COMB(a, v); }
    sh[l] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (l < w) { ACC u = sh[l], v = sh[l + w]; sh[l] = COMB(u, v); }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) { if (finish) STO(s, FIN(sh[0])); else part[s] = sh[0]; }
}
"""

_COMBINE = """
__kernel void KNAME(__global OT* out, __global const ACC* part, const long rows,
                    const long nchunk, const long count) {
    long o = get_global_id(0);
    if (o >= rows) return;
    ACC a = IDENT;
    for (long c = 0; c < nchunk; c++) { ACC v = part[o * nchunk + c]; a = COMB(a, v); }
    STO(o, FIN(a));
}
"""

_COLS_CPU = """
__kernel void KNAME(__global OT* out, __global const XT* x, const long outer,
                    const long K, const long inner, const long count) {
    long nb = (inner + CB - 1) / CB;
    long t = get_global_id(0);
    if (t >= outer * nb) return;
    DIVMOD(t, nb, o, blk);
    long i0 = blk * CB;
    long base = o * K * inner + i0, ob = o * inner + i0;
    if (i0 + CB <= inner) {         /* a full block: one row of CB columns per step */
        ACCV a@j = (ACCV)(IDENT);
        for (long k = 0; k < K; k++) {
            long p = base + k * inner;
            ACCV w@j = LDXV(p + @o);
            a@j = COMBV(a@j, w@j);
        }
        STOV(ob + @o, FIN(a@j));
        return;
    }
    for (long i = 0; i < inner - i0; i++) {
        ACC a = IDENT;
        for (long k = 0; k < K; k++) { ACC v = LDX(base + k * inner + i); a = COMB(a, v); }
        STO(ob + i, FIN(a));
    }
}
"""

_COLS_GPU = """
__kernel void KNAME(__global OT* out, __global const XT* x, const long outer,
                    const long K, const long inner, const long count) {
    long t = get_global_id(0);
    if (t >= outer * inner) return;
    DIVMOD(t, inner, o, i);
    long base = o * K * inner + i;
    ACC a = IDENT;
    for (long k = 0; k < K; k++) { ACC v = LDX(base + k * inner); a = COMB(a, v); }
    STO(t, FIN(a));
}
"""

_STRIDED = """
/* geo: kept sizes, kept strides, reduced sizes, reduced strides (outermost first) */
__kernel void KNAME(__global OT* out, __global const XT* x, const long nout,
                    __global const long* geo, const int nkept, const int nred,
                    const long count) {
    long o = get_global_id(0);
    if (o >= nout) return;
    long base = 0, r = o;
    for (int d = nkept - 1; d >= 0; d--) {
        DIVMOD(r, geo[d], q, i);
        base += i * geo[nkept + d];
        r = q;
    }
    __global const long* rs = geo + 2 * nkept;
    long last = rs[nred - 1], step = rs[2 * nred - 1];
    ACC a = IDENT;
    for (long q = 0; q < count / last; q++) {
        long off = base, r2 = q;
        for (int d = nred - 2; d >= 0; d--) {
            DIVMOD(r2, rs[d], q, i);
            off += i * rs[nred + d];
            r2 = q;
        }
        for (long j = 0; j < last; j++) { ACC v = LDX(off + j * step); a = COMB(a, v); }
    }
    STO(o, FIN(a));
}
"""

_TEMPLATES = {"rows_cpu": _ROWS_CPU, "rows_gpu": _ROWS_GPU, "combine": _COMBINE,
              "cols_cpu": _COLS_CPU, "cols_gpu": _COLS_GPU, "strided": _STRIDED}


def source(kernel: str, defs: dict, wg: int = 0) -> tuple[str, str]:
    """(name, source) of the Reduce kernel ``kernel`` with the op's ``defs``."""
    return template_source("reduce", _TEMPLATES, kernel, defs, wg)
