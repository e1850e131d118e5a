"""OpenCL C source of Sample: one row per work-item, RLX's ``sample_row`` step by step.

Every step is the oracle's (``ops/_sample_row``) in f32: quotients and exp are taken in
double and rounded once (correctly rounded, as the oracle's), sums run in order, and the
top-k cutoff and the top-p order come from a merge sort of the row in global scratch (the
top-p sort is stable, descending, ties by lower index). A NaN that would reach a sort sets
the node's error code, as RLX's sort panics. The draw is word ``b`` of the Philox stream.
"""
from __future__ import annotations

from ...ops import _philox
from ...ops._sample_row import TINY
from ._linalg_cl import named
from ._random_src import _PHILOX
from ._sort_src import RUN

_SRC = """
inline int sb_{name}(float a, float b, int desc) {{ return desc ? a > b : a < b; }}

/* sorts v[0, n) with ix; returns 1 when the result ended in (w, wi), else 0 */
inline int msort_{name}(__global float* v, __global int* ix, __global float* w,
                        __global int* wi, const long n, const int desc)
{{
    for (long lo = 0; lo < n; lo += {run}) {{
        const long hi = min(lo + {run}, n);
        for (long k = lo + 1; k < hi; k++) {{
            const float cv = v[k];
            const int ci = ix[k];
            long j = k - 1;
            while (j >= lo && sb_{name}(cv, v[j], desc)) {{
                v[j + 1] = v[j]; ix[j + 1] = ix[j]; j--;
            }}
            v[j + 1] = cv; ix[j + 1] = ci;
        }}
    }}
    int flip = 0;
    for (long wd = {run}; wd < n; wd *= 2) {{
        __global float* a = flip ? w : v;
        __global int* ai = flip ? wi : ix;
        __global float* b = flip ? v : w;
        __global int* bi = flip ? ix : wi;
        for (long lo = 0; lo < n; lo += 2 * wd) {{
            const long mid = min(lo + wd, n), hi = min(lo + 2 * wd, n);
            long i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {{
                if (sb_{name}(a[j], a[i], desc)) {{ b[o] = a[j]; bi[o++] = ai[j++]; }}
                else {{ b[o] = a[i]; bi[o++] = ai[i++]; }}
            }}
            while (i < mid) {{ b[o] = a[i]; bi[o++] = ai[i++]; }}
            while (j < hi) {{ b[o] = a[j]; bi[o++] = ai[j++]; }}
        }}
        flip = !flip;
    }}
    return flip;
}}

inline void renorm_{name}(__global float* p, const long v)
{{
    float s = 0.0f;
    for (long k = 0; k < v; k++) s = s + p[k];
    if (!(s >= {tiny}f)) s = {tiny}f;
    const float inv = (float)(1.0 / (double)s);
    for (long k = 0; k < v; k++) p[k] = p[k] * inv;
}}

__kernel void {name}(__global float* out, __global const float* x, __global float* fs,
                     __global int* is, const long batch, const long v, const uint k0,
                     const uint k1, const long top_k, const float top_p, const int use_p,
                     const float temp, __global int* rlx_err, const int err_code)
{{
    #pragma OPENCL FP_CONTRACT OFF
    const long b = get_global_id(0);
    if (b >= batch) return;
    __global const float* row = x + b * v;
    __global float* p = fs + b * 3 * v;
    __global float* sv = p + v;
    __global float* sw = sv + v;
    __global int* ix = is + b * 2 * v;
    __global int* iw = ix + v;
    for (long k = 0; k < v; k++) p[k] = (float)((double)row[k] / (double)temp);
    if (top_k > 0 && top_k < v) {{
        for (long k = 0; k < v; k++) {{
            if (isnan(p[k])) {{ *rlx_err = err_code + {nan_code}; out[b] = 0.0f; return; }}
            sv[k] = p[k]; ix[k] = (int)k;
        }}
        const float cut = (msort_{name}(sv, ix, sw, iw, v, 0) ? sw : sv)[v - top_k];
        for (long k = 0; k < v; k++) if (p[k] < cut) p[k] = -INFINITY;
    }}
    float m = -INFINITY;
    for (long k = 0; k < v; k++) if (p[k] > m) m = p[k];
    for (long k = 0; k < v; k++) p[k] = (float)exp((double)(p[k] - m));
    renorm_{name}(p, v);
    if (use_p) {{
        for (long k = 0; k < v; k++) {{
            if (isnan(p[k])) {{ *rlx_err = err_code + {nan_code}; out[b] = 0.0f; return; }}
            sv[k] = p[k]; ix[k] = (int)k;
        }}
        const int in_w = msort_{name}(sv, ix, sw, iw, v, 1);
        __global const float* ov = in_w ? sw : sv;
        __global const int* oi = in_w ? iw : ix;
        float cum = 0.0f;
        long last = v - 1;
        for (long j = 0; j < v; j++) {{
            cum = cum + ov[j];
            if (cum >= top_p) {{ last = j; break; }}
        }}
        for (long j = last + 1; j < v; j++) p[oi[j]] = 0.0f;
        renorm_{name}(p, v);
    }}
    const uint4 w4 = philox_{name}((ulong)(b / 4), k0, k1);
    const uint lane[4] = {{w4.x, w4.y, w4.z, w4.w}};
    const float r = unit_{name}(lane[b % 4]);
    float acc = 0.0f;
    long pick = v - 1;
    for (long k = 0; k < v; k++) {{
        acc = acc + p[k];
        if (r <= acc) {{ pick = k; break; }}
    }}
    out[b] = (float)pick;
}}
"""


def sample_source(nan_code: int) -> tuple[str, str]:
    """(name, source) of the Sample kernel (``nan_code``: the error reason for NaN)."""
    consts = dict(rounds=_philox.ROUNDS, m0=_philox.M0, m1=_philox.M1, w0=_philox.W0,
                  w1=_philox.W1)
    text = (_PHILOX.format(name="{name}", **consts)
            + _SRC.format(name="{name}", run=RUN, tiny=float(TINY).hex(), nan_code=nan_code))
    name = named("sample", text)
    return name, text.replace("{name}", name)
