"""OpenCL C of the index-valued reductions: ArgMax, ArgMin and TopK.

ArgMax (ArgMin) keeps the first strictly larger (smaller) non-NaN value, so ties give the
lowest index, -0 and +0 tie, and a slice whose element 0 is NaN gives 0 (RLX's scan).
``lines`` searches one line (stride ``inner``) per work-item; ``rows_cpu`` a row per
work-item in VW lanes (each the first best of its elements, merged lowest index first);
``rows_gpu`` splits a row over a work-group and merges (value, index) pairs in a tree, the
lower index winning ties. TopK keeps the ``k`` best candidates of a row sorted (value
descending, index ascending; NaN below every number) and inserts an element only when it
ranks above the k-th; the candidates live in private memory for small k and in a global
scratch row otherwise. Indices are stored in the output dtype (the input's float dtype,
f32-encoded, or i64).
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._reduce_c import BUFFER, compute_type, load, render, store, vec_defs

PRIVATE_K = 64           # up to this k the TopK candidates are private arrays


def select_defs(xdt: DType, odt: DType, device, largest: bool = True) -> dict:
    """Macros of ArgMax (``largest``), ArgMin or TopK reading ``xdt`` into ``odt``."""
    ct = compute_type(xdt)
    vec = vec_defs(device, ct, {"x": xdt}, None)
    n = vec["VW"]
    iv = f"int{n}" if ct == "float" else f"long{n}"     # lane masks (and indices) of ctn
    return {"XT": BUFFER[xdt], "OT": BUFFER[odt], "CT": ct, "CTV": f"{ct}{n}", "IV": iv,
            "LANE_IDS": "(" + ", ".join(str(j) for j in range(int(n))) + ")", **vec,
            "LDX(i)": load(xdt, "x", "(i)", ct),
            "STO(i, v)": store(odt, "out", "(i)", "(v)"),
            "BETTER(v, b)": "((v) > (b))" if largest else "((v) < (b))",
            "ISNUM(v)": "((v) == (v))" if xdt.is_float else "1",
            "ISNUMV(v)": "((v) == (v))" if xdt.is_float else f"(({iv})(-1))"}


_LINES = """
__kernel void KNAME(__global OT* out, __global const XT* x, const long outer, const long K,
                    const long inner) {
    long t = get_global_id(0);
    if (t >= outer * inner) return;
    DIVMOD(t, inner, o, i);
    long base = o * K * inner + i;
    CT best = 0;
    long idx = -1;
    for (long k = 0; k < K; k++) {
        CT v = LDX(base + k * inner);
        if (ISNUM(v) && (idx < 0 || BETTER(v, best))) { best = v; idx = k; }
    }
    CT x0 = LDX(base);                    /* RLX: a NaN at element 0 is never beaten */
    STO(t, idx < 0 || !ISNUM(x0) ? 0 : idx);
}
"""

_ROWS_CPU = """
/* a lane's best (v at index j) wins over the running one if better, or equal and earlier */
#define TAKE(v, j) if ((j) >= 0 && (idx < 0 || BETTER(v, best) || \\
                                    ((v) == best && (j) < idx))) { best = (v); idx = (j); }
__kernel void KNAME(__global OT* out, __global const XT* x, const long rows, const long K) {
    long r = get_global_id(0);
    if (r >= rows) return;
    long lo = r * K, i = 0;
    /* VW lanes, each the first best of its own elements (index -1: none yet) */
    CTV bv = (CTV)0;
    IV bi = (IV)(-1);
    for (; i + VW <= K; i += VW) {
        CTV v = LDXV(lo + i);
        IV upd = BETTER(v, bv) | ((bi < (IV)0) & ISNUMV(v));
        bv = select(bv, v, upd);
        bi = select(bi, (IV)(i) + (IV)LANE_IDS, upd);
    }
    CT best = 0;
    long idx = -1;
    TAKE(bv.@s, bi.@s);
    for (; i < K; i++) {         /* later than every lane's index: strictly better only */
        CT v = LDX(lo + i);
        if (ISNUM(v) && (idx < 0 || BETTER(v, best))) { best = v; idx = i; }
    }
    CT x0 = LDX(lo);
    STO(r, idx < 0 || !ISNUM(x0) ? 0 : idx);
}
#undef TAKE
"""

_ROWS_GPU = """
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void KNAME(__global OT* out, __global const XT* x, const long rows, const long K) {
    __local CT sb[WG];
    __local long si[WG];
    long r = get_group_id(0);
    int l = get_local_id(0);
    CT best = 0;
    long idx = -1;
    for (long k = l; k < K; k += WG) {
        CT v = LDX(r * K + k);
        if (ISNUM(v) && (idx < 0 || BETTER(v, best))) { best = v; idx = k; }
    }
    sb[l] = best;
    si[l] = idx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (l < w) {
            long j2 = si[l + w], j1 = si[l];
            CT b2 = sb[l + w], b1 = sb[l];
            if (j2 >= 0 && (j1 < 0 || BETTER(b2, b1) || (b2 == b1 && j2 < j1))) {
                sb[l] = b2;
                si[l] = j2;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) {
        CT x0 = LDX(r * K);
        STO(r, si[0] < 0 || !ISNUM(x0) ? 0 : si[0]);
    }
}
"""

_TOPK = """
/* a ranks above b: a is a number and b is NaN or smaller (equal: neither) */
#define ABOVE(a, b) (ISNUM(a) && (!ISNUM(b) || (a) > (b)))
__kernel void KNAME(__global OT* out, __global const XT* x, const long rows, const long n,
                    __global CT* gvals, __global long* gidx) {
    long r = get_global_id(0);
    if (r >= rows) return;
#if PRIVATE
    CT vals[TK];
    long idx[TK];
#else
    __global CT* vals = gvals + r * TK;
    __global long* idx = gidx + r * TK;
#endif
    long cnt = 0;
    for (long j = 0; j < n; j++) {
        CT v = LDX(r * n + j);
        long p;
        if (cnt == TK) {
            if (!ABOVE(v, vals[TK - 1])) continue;
            p = TK - 1;
        } else {
            p = cnt++;
        }
        while (p > 0 && ABOVE(v, vals[p - 1])) {    /* stable: equals stay in front */
            vals[p] = vals[p - 1];
            idx[p] = idx[p - 1];
            p--;
        }
        vals[p] = v;
        idx[p] = j;
    }
    for (long j = 0; j < TK; j++) STO(r * TK + j, idx[j]);
}
#undef ABOVE
"""


def source(kernel: str, defs: dict, wg: int = 0, k: int = 0) -> tuple[str, str]:
    """(name, source) of ``lines``, ``rows_cpu``, ``rows_gpu`` (ArgMax/ArgMin) or ``topk``."""
    if kernel == "topk":
        return render("topk", {**defs, "TK": str(k), "PRIVATE": str(int(k <= PRIVATE_K))},
                      _TOPK)
    extra = {"WG": str(wg)} if kernel == "rows_gpu" else {}
    return render(f"arg_{kernel}", {**defs, **extra},
                  {"lines": _LINES, "rows_cpu": _ROWS_CPU, "rows_gpu": _ROWS_GPU}[kernel])
