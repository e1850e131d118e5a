"""OpenCL C helpers pasted at the top of every program (the C dialect's prelude).

They pin down the semantics the op references have and C's operators do not, exactly as
the Numba prelude does: NaN-aware max/min with -0 < +0, stable sigmoid/softplus,
sign(NaN) = 0, saturating float→int, truncating integer division that reports division by
zero through the plan's error word instead of trapping. Float helpers exist once per
compute type (suffix ``_f``/``_d``); the renderer picks the suffix.
"""
from __future__ import annotations

_FLOAT_HELPERS = """
inline T rlx_sigmoid_S(T x) {
    T e = exp(-fabs(x));
    T p = (T)1 / ((T)1 + e);
    return x >= (T)0 ? p : e * p;
}
inline T rlx_tanh_S(T x) {
    /* some libms miss tanh(±inf) = ±1 by an ulp; past 20 every type has saturated */
    return fabs(x) > (T)20 ? copysign((T)1, x) : tanh(x);
}
inline T rlx_relu_S(T x) { return x > (T)0 ? x : (T)0; }
inline T rlx_sign_S(T x) { return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (T)0); }
inline T rlx_softplus_S(T x) {
    return x == x ? fmax(x, (T)0) + log1p(exp(-fabs(x))) : x;
}
inline T rlx_fmax_S(T a, T b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == (T)0 && b == (T)0) return a + b;
    return a > b ? a : b;
}
inline T rlx_fmin_S(T a, T b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == (T)0 && b == (T)0) return -((-a) + (-b));
    return a < b ? a : b;
}
inline long rlx_f2l_S(T x) {      /* the spec's NaN -> 0, spelled out: not every
                                      implementation's saturating convert honours it */
    return x != x ? 0L : convert_long_sat_rtz(x);
}
"""

_INT_HELPERS = """
inline long rlx_idiv_l(__global int* err, int code, long a, long b) {
    if (b == 0) { *err = code + 2; return 0; }
    if (b == -1) return (long)(0UL - (ulong)a);      /* LONG_MIN / -1 wraps, no trap */
    return a / b;
}
inline long rlx_imod_l(__global int* err, int code, long a, long b) {
    if (b == 0) { *err = code + 2; return 0; }
    if (b == -1) return 0;
    return a % b;
}
inline long rlx_ipow_l(__global int* err, int code, long a, long b) {
    if (b < 0) { *err = code + 3; return 0; }
    ulong r = 1, base = (ulong)a;
    while (b > 0) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (long)r;
}
"""


_SIXTEEN = """
inline float rlx_rnd_f16(float x) {     /* round to the nearest half, kept as float */
    ushort h;                           /* half storage without cl_khr_fp16 */
    vstore_half_rte(x, 0, (__private half*)&h);
    return vload_half(0, (__private const half*)&h);
}
inline float rlx_bf16_load(ushort b) { return as_float((uint)b << 16); }
inline float rlx_rnd_bf16(float x) {    /* nearest bfloat16, ties to even */
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    return as_float(u & 0xffff0000u);
}
inline ushort rlx_bf16_bits(float x) { return (ushort)(as_uint(x) >> 16); }
"""


def prelude(fp64: bool) -> str:
    """The helpers for one program: float always, double when the device has fp64."""
    parts = []
    if fp64:
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
    parts.append(_FLOAT_HELPERS.replace("T", "float").replace("_S(", "_f("))
    if fp64:
        parts.append(_FLOAT_HELPERS.replace("T", "double").replace("_S(", "_d("))
    parts.append(_INT_HELPERS)
    parts.append(_SIXTEEN)
    return "".join(parts)
