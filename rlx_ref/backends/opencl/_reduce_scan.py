"""OpenCL C of the running scans (Cumsum, CumProd, CumMax) over ``[outer, K, inner]``.

``COMB(a, v)`` combines the running value ``a`` with the next element ``v``; with
``exclusive`` each output takes the running value before its own element. Integer sums
and products run in ulong (they wrap, as numpy's), CumMax in long; float sums and
products run in double where the device has fp64 and the style is CPU (a running f32 sum
would drift by K·eps), else in the compute type. CumMax skips NaN and lets the new element
win ties, as ``np.maximum.accumulate`` after NaN → -inf.

Kernels: ``lines`` (one scan line per work-item, stride ``inner``: rows on CPUs, columns
and CumProd rows on GPUs); ``cols_cpu`` (blocks of 32 or 64 lines in vectors); for a few
long rows on CPUs ``seg_total``, ``carry`` and ``seg_scan`` (segment totals, their
exclusive scan per row, each segment rescanned from its carry); ``rows_gpu`` (a row per
work-group, tiles scanned in local memory with a carry between tiles). A tree scan
regroups the products of CumProd, which moves where huge and tiny factors overflow or
underflow (inf·0 = NaN where the running product is finite), so CumProd rows stay
sequential on GPUs.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._reduce_c import (
    BUFFER,
    compute_type,
    load,
    lowest,
    store,
    template_source,
    vec_defs,
)

# The wide accumulator of f32/f16/bf16 sums and products; the backend's Cumsum promise
# rests on it (a test narrows it to float to check that conformance notices).
WIDE = "double"

_COMB = {   # (scalar, vector)
    "Cumsum": ("((a) + (v))",) * 2,
    "CumProd": ("((a) * (v))",) * 2,
    "CumMaxF": ("((v) != (v) ? (a) : ((a) > (v) ? (a) : (v)))",
                "select((v), (a), isnan(v) | ((a) > (v)))"),
    "CumMaxI": ("((a) > (v) ? (a) : (v))", "max((a), (v))"),
}


def scan_defs(kind: str, dt: DType, wide: bool, device) -> dict:
    """Macros of scan ``kind`` over ``dt`` on ``device``; ``wide``: f32 sums/products run
    in double."""
    if kind == "CumMax":
        ct, comb, ident = compute_type(dt), _COMB["CumMaxF" if dt.is_float else "CumMaxI"], \
            lowest(dt)
    else:
        ct = compute_type(dt, unsigned=True)
        if wide and dt.is_float:
            ct = WIDE
        comb, ident = _COMB[kind], "0" if kind == "Cumsum" else "1"
    vec = vec_defs(device, ct, {"x": dt}, dt)
    return {"XT": BUFFER[dt], "ACC": ct, "ACCV": f"{ct}{vec['VW']}",
            "IDENT": f"(({ct}){ident})", **vec,
            "LDX(i)": load(dt, "x", "(i)", ct),
            "STO(i, v)": store(dt, "out", "(i)", "(v)"),
            "COMB(a, v)": comb[0], "COMBV(a, v)": comb[1]}


_LINES = """
__kernel void KNAME(__global XT* out, __global const XT* x, const long outer, const long K,
                    const long inner, const int excl) {
    long t = get_global_id(0);
    if (t >= outer * inner) return;
    DIVMOD(t, inner, o, i);
    long j = o * K * inner + i;
    ACC a = IDENT;
    if (excl) {
        for (long k = 0; k < K; k++, j += inner) { ACC v = LDX(j); STO(j, a); a = COMB(a, v); }
    } else {
        for (long k = 0; k < K; k++, j += inner) { ACC v = LDX(j); a = COMB(a, v); STO(j, a); }
    }
}
"""

_COLS_CPU = """
__kernel void KNAME(__global XT* out, __global const XT* x, const long outer, const long K,
                    const long inner, const int excl) {
    long nb = (inner + CB - 1) / CB;
    long t = get_global_id(0);
    if (t >= outer * nb) return;
    DIVMOD(t, nb, o, blk);
    long row = o * K * inner, base = row + blk * CB;
    if (blk * CB + CB > inner) {       /* the last, partial block: line by line */
        for (long i = base; i < row + inner; i++) {
            ACC a = IDENT;
            for (long j = i; j < i + K * inner; j += inner) {
                ACC v = LDX(j);
                if (excl) STO(j, a);
                a = COMB(a, v);
                if (!excl) STO(j, a);
            }
        }
        return;
    }
    ACCV a@j = (ACCV)(IDENT);
    for (long p = base; p < base + K * inner; p += inner) {
        ACCV v@j = LDXV(p + @o);
        if (excl) STOV(p + @o, a@j);
        a@j = COMBV(a@j, v@j);
        if (!excl) STOV(p + @o, a@j);
    }
}
"""

_SEG_TOTAL = """
__kernel void KNAME(__global ACC* part, __global const XT* x, const long nseg, const long K,
                    const long chunk, const long nchunk) {
    long s = get_global_id(0);
    if (s >= nseg) return;
    DIVMOD(s, nchunk, o, c);
    long lo = o * K + c * chunk, n = min(chunk, K - c * chunk);
    ACC a = IDENT;
    for (long i = 0; i < n; i++) { ACC v = LDX(lo + i); a = COMB(a, v); }
    part[s] = a;
}
"""

_CARRY = """
__kernel void KNAME(__global ACC* part, const long rows, const long nchunk) {
    long r = get_global_id(0);
    if (r >= rows) return;
    ACC a = IDENT;
    for (long c = 0; c < nchunk; c++) {      /* in place: the carry into each segment */
        ACC v = part[r * nchunk + c];
        part[r * nchunk + c] = a;
        a = COMB(a, v);
    }
}
"""

_SEG_SCAN = """
__kernel void KNAME(__global XT* out, __global const XT* x, __global const ACC* part,
                    const long nseg, const long K, const long chunk, const long nchunk,
                    const int excl) {
    long s = get_global_id(0);
    if (s >= nseg) return;
    DIVMOD(s, nchunk, o, c);
    long lo = o * K + c * chunk, n = min(chunk, K - c * chunk);
    ACC a = part[s];
    if (excl) {
        for (long i = 0; i < n; i++) { ACC v = LDX(lo + i); STO(lo + i, a); a = COMB(a, v); }
    } else {
        for (long i = 0; i < n; i++) { ACC v = LDX(lo + i); a = COMB(a, v); STO(lo + i, a); }
    }
}
"""

_ROWS_GPU = """
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void KNAME(__global XT* out, __global const XT* x, const long rows, const long K,
           const int excl) {
    __local ACC sh[WG];
    long lo = get_group_id(0) * K;
    int l = get_local_id(0);
    ACC carry = IDENT;
    for (long t0 = 0; t0 < K; t0 += WG) {
        long j = t0 + l;
        ACC v = IDENT;
        if (j < K) v = LDX(lo + j);
        sh[l] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = 1; w < WG; w <<= 1) {     /* Hillis-Steele: earlier values on the left */
            ACC u = l >= w ? sh[l - w] : IDENT;
            barrier(CLK_LOCAL_MEM_FENCE);
            if (l >= w) { ACC cur = sh[l]; sh[l] = COMB(u, cur); }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        ACC mine = sh[l];
        ACC before = l > 0 ? sh[l - 1] : IDENT;
        ACC total = sh[WG - 1];
        if (j < K) {
            if (excl) { ACC e = l > 0 ? COMB(carry, before) : carry; STO(lo + j, e); }
            else { ACC e = COMB(carry, mine); STO(lo + j, e); }
        }
        carry = COMB(carry, total);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
"""

_TEMPLATES = {"lines": _LINES, "cols_cpu": _COLS_CPU, "seg_total": _SEG_TOTAL,
              "carry": _CARRY, "seg_scan": _SEG_SCAN, "rows_gpu": _ROWS_GPU}


def source(kernel: str, defs: dict, wg: int = 0) -> tuple[str, str]:
    """(name, source) of the scan kernel ``kernel`` with the scan's ``defs``."""
    return template_source("scan", _TEMPLATES, kernel, defs, wg)
