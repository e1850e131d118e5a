"""OpenCL C of the normalizations: LayerNorm, RmsNorm, GroupNorm, LayerNorm2d, BatchNorm.

Statistics are two-pass (the mean, then Σ(x - mean)², which stays accurate where
E[x²] - E[x]² cancels) in the compute type: double when any operand is f64 or, with
``wide`` (CPU-style kernels on a device with fp64), for every dtype, else float. Both
passes work on x - p, p the block's (line's) first element: a large common offset
(1e4 + N(0,1)) then costs no digits of the mean, which a float sum of raw x would lose
(where some x - p overflows, the mean is summed again unshifted).
RmsNorm is the same kernel with the mean fixed at 0. ``rows_*`` normalize contiguous
blocks of ``Cg·S`` elements (a LayerNorm row over the last axis: Cg = C, S = 1; a
GroupNorm group: C/groups channels × S spatial positions), the affine channel of element
e of block r being ``(r % G)·Cg + e / S``; the CPU kernel runs a block per work-item with
VW-wide vectors (the block stays in cache between passes), the GPU one a block per
work-group with trees in local memory. ``cols`` normalizes one line of ``[outer, C,
inner]`` per work-item (LayerNorm on another axis, LayerNorm2d) and ``cols_cpu`` blocks of
4·VW lines in vectors; ``batchnorm`` is one element per work-item, channels on the last axis.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._reduce_c import BUFFER, load, render, store, unroll, vec_defs


# The wide compute type; the backend's f64 promise for the normalizations rests on it (a
# test narrows it to float to check that conformance notices).
WIDE = "double"


def norm_defs(dts: list, device, rms: bool = False, wide: bool = False) -> dict:
    """Macros for x (``dts[0]``, also the output) and its per-feature operands; ``wide``:
    compute in ``WIDE`` whatever the dtypes."""
    ct = "double" if DType.F64 in dts else WIDE if wide else "float"
    vec = vec_defs(device, ct, dict(zip("xgbmv", dts)), dts[0])
    defs = {"CT": ct, "CTV": f"{ct}{vec['VW']}", "RMS": str(int(rms)), "XT": BUFFER[dts[0]],
            "STO(i, v)": store(dts[0], "out", "(i)", "(v)"), **vec}
    for name, dt in zip("xgbmv", dts):
        up = name.upper()
        defs[f"{up}T"] = BUFFER[dt]
        defs[f"LD{up}(i)"] = load(dt, name, "(i)", ct)
    return defs

_ROWS_CPU = """
__kernel void KNAME(__global XT* out, __global const XT* x, __global const GT* g,
                    __global const BT* b, const long rows, const long G, const long Cg,
                    const long S, const CT eps) {
    long r = get_global_id(0);
    if (r >= rows) return;
    long L = Cg * S, lo = r * L, i;
    CT mean = 0, s = 0, piv = 0;
    CTV s0, s1;
#if !RMS
    piv = L ? LDX(lo) : 0;
    for (int pass = 0; pass < 2; pass++) {       /* unshifted if some x - p overflowed */
        s0 = (CTV)0; s1 = s0; s = 0;
        for (i = 0; i + 2 * VW <= L; i += 2 * VW) {
            s0 += LDXV(lo + i) - piv; s1 += LDXV(lo + i + VW) - piv;
        }
        s0 += s1;
        s += s0.@s;
        for (; i < L; i++) s += LDX(lo + i) - piv;
        if (isfinite(s) || piv == 0) break;
        piv = 0;
    }
    mean = s / (CT)L;
    s = 0;
#endif
    s0 = (CTV)0; s1 = s0;
    for (i = 0; i + 2 * VW <= L; i += 2 * VW) {
        CTV d0 = (LDXV(lo + i) - piv) - mean, d1 = (LDXV(lo + i + VW) - piv) - mean;
        s0 += d0 * d0; s1 += d1 * d1;
    }
    s0 += s1;
    s += s0.@s;
    for (; i < L; i++) { CT d = (LDX(lo + i) - piv) - mean; s += d * d; }
    CT rstd = (CT)1 / sqrt(s / (CT)L + eps);
    long c0 = (r % G) * Cg;
    if (S == 1) {
        for (i = 0; i + VW <= L; i += VW)
            STOV(lo + i, ((LDXV(lo + i) - piv) - mean) * rstd * LDGV(c0 + i) + LDBV(c0 + i));
        for (; i < L; i++)
            STO(lo + i, ((LDX(lo + i) - piv) - mean) * rstd * LDG(c0 + i) + LDB(c0 + i));
        return;
    }
    for (long c = 0; c < Cg; c++) {
        CT sc = rstd * LDG(c0 + c), sh = LDB(c0 + c);
        long base = lo + c * S;
        for (i = 0; i + VW <= S; i += VW)
            STOV(base + i, ((LDXV(base + i) - piv) - mean) * sc + sh);
        for (; i < S; i++) STO(base + i, ((LDX(base + i) - piv) - mean) * sc + sh);
    }
}
"""

_ROWS_GPU = """
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void KNAME(__global XT* out, __global const XT* x, __global const GT* g,
           __global const BT* b, const long rows, const long G, const long Cg,
           const long S, const CT eps) {
    __local CT sh[WG];
    long r = get_group_id(0);
    int l = get_local_id(0);
    long L = Cg * S, lo = r * L;
    CT mean = 0, s = 0, piv = 0;
#if !RMS
    piv = L ? LDX(lo) : 0;
    for (int pass = 0; pass < 2; pass++) {       /* unshifted if some x - p overflowed */
        s = 0;
        for (long i = l; i < L; i += WG) s += LDX(lo + i) - piv;
        sh[l] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = WG / 2; w > 0; w >>= 1) {
            if (l < w) sh[l] += sh[l + w];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        s = sh[0];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (isfinite(s) || piv == 0) break;        /* the same choice in every work-item */
        piv = 0;
    }
    mean = s / (CT)L;
    s = 0;
#endif
    for (long i = l; i < L; i += WG) { CT d = (LDX(lo + i) - piv) - mean; s += d * d; }
    sh[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (l < w) sh[l] += sh[l + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    CT rstd = (CT)1 / sqrt(sh[0] / (CT)L + eps);
    long c0 = (r % G) * Cg;
    for (long i = l; i < L; i += WG) {
        long c = c0 + i / S;
        STO(lo + i, ((LDX(lo + i) - piv) - mean) * rstd * LDG(c) + LDB(c));
    }
}
"""

_LINE = """
inline void LINE(__global XT* out, __global const XT* x, __global const GT* g,
                 __global const BT* b, const long C, const long inner, const long base,
                 const CT eps) {
    CT mean = 0, s = 0, piv = 0;
#if !RMS
    piv = C ? LDX(base) : 0;
    for (int pass = 0; pass < 2; pass++) {       /* unshifted if some x - p overflowed */
        s = 0;
        for (long c = 0; c < C; c++) s += LDX(base + c * inner) - piv;
        if (isfinite(s) || piv == 0) break;
        piv = 0;
    }
    mean = s / (CT)C;
    s = 0;
#endif
    for (long c = 0; c < C; c++) { CT d = (LDX(base + c * inner) - piv) - mean; s += d * d; }
    CT rstd = (CT)1 / sqrt(s / (CT)C + eps);
    for (long c = 0; c < C; c++)
        STO(base + c * inner, ((LDX(base + c * inner) - piv) - mean) * rstd * LDG(c) + LDB(c));
}
"""

_COLS = """
__kernel void KNAME(__global XT* out, __global const XT* x, __global const GT* g,
                    __global const BT* b, const long outer, const long C, const long inner,
                    const CT eps) {
    long t = get_global_id(0);
    if (t >= outer * inner) return;
    DIVMOD(t, inner, o, i);
    LINE(out, x, g, b, C, inner, o * C * inner + i, eps);
}
"""

_COLS_CPU = """
__kernel void KNAME(__global XT* out, __global const XT* x, __global const GT* g,
                    __global const BT* b, const long outer, const long C, const long inner,
                    const CT eps) {
    long nb = (inner + CB - 1) / CB;
    long t = get_global_id(0);
    if (t >= outer * nb) return;
    DIVMOD(t, nb, o, blk);
    long row = o * C * inner, base = row + blk * CB;
    if (blk * CB + CB > inner) {       /* the last, partial block: line by line */
        for (long i = base; i < row + inner; i++) LINE(out, x, g, b, C, inner, i, eps);
        return;
    }
    CTV mean@j = (CTV)0, piv@j = (CTV)0;
#if !RMS
    if (C) piv@j = LDXV(base + @o);
    for (int pass = 0; pass < 2; pass++) {       /* unshifted if some x - p overflowed */
        int bad = 0;
        for (long p = base; p < base + C * inner; p += inner) mean@j += LDXV(p + @o) - piv@j;
        bad |= any(isfinite(mean@j) == 0);
        if (!bad || pass) break;
        piv@j = (CTV)0; mean@j = (CTV)0;
    }
    mean@j /= (CT)C;
#endif
    CTV q@j = (CTV)0;
    for (long p = base; p < base + C * inner; p += inner) {
        CTV d@j = (LDXV(p + @o) - piv@j) - mean@j;
        q@j += d@j * d@j;
    }
    CTV r@j = (CT)1 / sqrt(q@j / (CT)C + eps);
    for (long c = 0; c < C; c++) {
        long p = base + c * inner;
        CT gc = LDG(c), bc = LDB(c);
        STOV(p + @o, ((LDXV(p + @o) - piv@j) - mean@j) * r@j * gc + bc);
    }
}
"""

_BATCHNORM = """
__kernel void KNAME(__global XT* out, __global const XT* x, __global const GT* g,
                    __global const BT* b, __global const MT* m, __global const VT* v,
                    const long n, const long C, const CT eps) {
    long i = get_global_id(0);
    if (i >= n) return;
    long c = i % C;
    STO(i, LDG(c) * (LDX(i) - LDM(c)) / sqrt(LDV(c) + eps) + LDB(c));
}
"""

_TEMPLATES = {"rows_cpu": _ROWS_CPU, "rows_gpu": _ROWS_GPU, "cols": _COLS,
              "cols_cpu": _COLS_CPU, "batchnorm": _BATCHNORM}
COL_VECTORS = 4          # 4·VW columns per block: mean, q and the data fit the registers


def source(kernel: str, defs: dict, wg: int = 0) -> tuple[str, str]:
    """(name, source) of the normalization kernel ``kernel``."""
    extra = {"WG": str(wg)} if kernel == "rows_gpu" else {}
    text = _TEMPLATES[kernel]
    if kernel.startswith("cols"):       # the line helper is named after its kernel
        vw = int(defs["VW"])
        extra["CB"] = str(vw * COL_VECTORS)
        text = _LINE + unroll(text, COL_VECTORS, vw)
    name, src = render(f"norm_{kernel}", {**defs, **extra}, text)
    return name, src.replace("LINE(", f"{name}_line(")
