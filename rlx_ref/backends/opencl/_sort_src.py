"""OpenCL C source of Sort and ArgSort: a stable merge sort of each line per work-item.

A line (one (outer, inner) pair of the [outer, n, inner] view) is copied with its source
indices into global scratch in the compute type, runs of ``RUN`` are put in order by
insertion, then bottom-up merges take from the right run only when its head ranks strictly
before the left one, so equal values keep their input order in both directions. Ranking is
the oracle's: NaN above +inf. Sort copies the winning source element's bits (exact for
every dtype); ArgSort stores the index in the output's dtype.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import named

RUN = 16
FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
# the buffer type of each dtype, and the type its values are compared in
BUF = {DType.F32: "float", DType.F64: "double", DType.F16: "ushort", DType.BF16: "ushort",
       DType.I8: "char", DType.I16: "short", DType.I32: "int", DType.I64: "long",
       DType.U8: "uchar", DType.U32: "uint"}
CMP = {DType.F32: "float", DType.F64: "double", DType.F16: "float", DType.BF16: "float",
       DType.I8: "int", DType.I16: "int", DType.I32: "int", DType.I64: "long",
       DType.U8: "uint", DType.U32: "uint"}

# a ranks strictly before b
_BEFORE = {
    (True, False): "(a == a && (b != b || a < b))",
    (True, True): "((a != a) ? (b == b) : (b == b && a > b))",
    (False, False): "(a < b)",
    (False, True): "(a > b)",
}

_SRC = """
inline int before_{name}({ct} a, {ct} b) {{ return {before}; }}

__kernel void {name}(__global {bt}* out, __global const {bt}* x, __global {ct}* sv,
                     __global int* si, const long lines, const long n, const long inner)
{{
    const long line = get_global_id(0);
    if (line >= lines) return;
    const long base = (line / inner) * n * inner + line % inner;
    __global {ct}* v = sv + line * 2 * n;         /* two value runs of n per line */
    __global int* ix = si + line * 2 * n;
    for (long k = 0; k < n; k++) {{
        v[k] = {load};
        ix[k] = (int)k;
    }}
    for (long lo = 0; lo < n; lo += {run}) {{       /* insertion sort: stable */
        const long hi = min(lo + {run}, n);
        for (long k = lo + 1; k < hi; k++) {{
            const {ct} cv = v[k];
            const int ci = ix[k];
            long j = k - 1;
            while (j >= lo && before_{name}(cv, v[j])) {{
                v[j + 1] = v[j];
                ix[j + 1] = ix[j];
                j--;
            }}
            v[j + 1] = cv;
            ix[j + 1] = ci;
        }}
    }}
    __global {ct}* a = v;
    __global int* ai = ix;
    __global {ct}* b = v + n;
    __global int* bi = ix + n;
    for (long w = {run}; w < n; w *= 2) {{
        for (long lo = 0; lo < n; lo += 2 * w) {{
            const long mid = min(lo + w, n), hi = min(lo + 2 * w, n);
            long i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {{
                if (before_{name}(a[j], a[i])) {{ b[o] = a[j]; bi[o++] = ai[j++]; }}
                else {{ b[o] = a[i]; bi[o++] = ai[i++]; }}
            }}
            while (i < mid) {{ b[o] = a[i]; bi[o++] = ai[i++]; }}
            while (j < hi) {{ b[o] = a[j]; bi[o++] = ai[j++]; }}
        }}
        __global {ct}* t = a; a = b; b = t;
        __global int* ti = ai; ai = bi; bi = ti;
    }}
    for (long k = 0; k < n; k++) {{
        const long o = base + k * inner;
        {store}
    }}
}}
"""


# GPU style: one work-group per line, a bitonic network over (value, index) pairs in local
# memory. Ties are broken by the source index, so the order is total and the network's
# result is exactly the stable sort; pad slots (index >= n) rank after every element.
_GROUP = """
inline int before_{name}({ct} a, {ct} b) {{ return {before}; }}

inline int prec_{name}({ct} a, int ia, {ct} b, int ib, const int n)
{{
    if (ia >= n || ib >= n) return ia < ib;
    return before_{name}(a, b) || (!before_{name}(b, a) && ia < ib);
}}

__kernel void {name}(__global {bt}* out, __global const {bt}* x, const long n_,
                     const long inner)
{{
    __local {ct} v[{np}];
    __local int ai[{np}];
    const long line = get_group_id(0);
    const int lid = get_local_id(0), lsz = get_local_size(0), n = (int)n_;
    const long base = (line / inner) * n_ * inner + line % inner;
    for (int k = lid; k < {np}; k += lsz) {{
        v[k] = k < n ? {load} : 0;
        ai[k] = k;
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 2; k <= {np}; k <<= 1) {{
        for (int j = k >> 1; j > 0; j >>= 1) {{
            for (int t = lid; t < {np} / 2; t += lsz) {{
                const int i = (t / j) * 2 * j + t % j, l = i + j;
                const int up = (i & k) == 0;
                const int swap = up ? prec_{name}(v[l], ai[l], v[i], ai[i], n)
                                    : prec_{name}(v[i], ai[i], v[l], ai[l], n);
                if (swap) {{
                    const {ct} tv = v[i]; v[i] = v[l]; v[l] = tv;
                    const int ti = ai[i]; ai[i] = ai[l]; ai[l] = ti;
                }}
            }}
            barrier(CLK_LOCAL_MEM_FENCE);
        }}
    }}
    for (int k = lid; k < n; k += lsz) {{
        const long o = base + k * inner;
        {store}
    }}
}}
"""


def group_pad(n: int) -> int:
    """The bitonic network's width for lines of ``n``: the next power of two (>= 2)."""
    return max(2, 1 << max(0, n - 1).bit_length())


def _load(dt: DType) -> str:
    idx = "x[base + k * inner]"
    if dt is DType.F16:
        return "vload_half(base + k * inner, (__global const half*)x)"
    if dt is DType.BF16:
        return f"rlx_bf16_load({idx})"
    return f"({CMP[dt]}){idx}"


def _load_at(dt: DType, k: str) -> str:
    return _load(dt).replace("base + k * inner", f"base + (long){k} * inner")


def _store_index(dt: DType) -> str:
    if dt is DType.F16:
        return "vstore_half_rte((float)ai[k], o, (__global half*)out);"
    if dt is DType.BF16:
        return "out[o] = rlx_bf16_bits(rlx_rnd_bf16((float)ai[k]));"
    return f"out[o] = ({BUF[dt]})ai[k];"


def sort_source(dt: DType, descending: bool, arg: bool) -> tuple[str, str]:
    """(name, source) of the line sort of ``dt`` (values, or indices with ``arg``)."""
    store = _store_index(dt) if arg else "out[o] = x[base + (long)ai[k] * inner];"
    text = _SRC.format(name="{name}", ct=CMP[dt], bt=BUF[dt], run=RUN, load=_load(dt),
                       before=_BEFORE[(dt in FLOATS, descending)], store=store)
    name = named("argsort" if arg else "sort", text)
    return name, text.replace("{name}", name)


def sort_group_source(dt: DType, descending: bool, arg: bool, width: int) -> tuple[str, str]:
    """(name, source) of the work-group bitonic sort of lines padded to ``width``."""
    store = _store_index(dt) if arg else "out[o] = x[base + (long)ai[k] * inner];"
    text = _GROUP.format(name="{name}", ct=CMP[dt], bt=BUF[dt], np=width,
                         load=_load_at(dt, "k"), before=_BEFORE[(dt in FLOATS, descending)],
                         store=store)
    name = named("argsort_wg" if arg else "sort_wg", text)
    return name, text.replace("{name}", name)
