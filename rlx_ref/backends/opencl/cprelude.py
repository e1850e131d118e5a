"""OpenCL C helpers pasted at the top of every program (the C dialect's prelude).

They pin down the semantics the op references have and C's operators do not, exactly as
the Numba prelude does: NaN-aware max/min with -0 < +0, stable sigmoid/softplus,
sign(NaN) = 0, saturating float→int, truncating integer division that reports division by
zero through the plan's error word instead of trapping. Float helpers exist once per
compute type (suffix ``_f``/``_d``); the renderer picks the suffix.
"""
from __future__ import annotations

# double: the device's libm (a GPU's is inlined; accuracy first)
_LIBM_HELPERS = """
RLX_INLINE T rlx_sigmoid_S(T x) {
    T e = exp(-fabs(x));
    T p = (T)1 / ((T)1 + e);
    return x >= (T)0 ? p : e * p;
}
RLX_INLINE T rlx_tanh_S(T x) {
    /* some libms miss tanh(±inf) = ±1 by an ulp; past 20 every type has saturated */
    return fabs(x) > (T)20 ? copysign((T)1, x) : tanh(x);
}
"""

# float: exp and tanh as straight-line arithmetic and selects. A CPU implementation runs
# work-items as SIMD lanes only when a kernel makes no calls; PoCL's float tanh and exp are
# scalar library calls on AVX2 targets (the gelu chain ran 4.5x slower than onnxruntime).
# e^x = 2^k·e^r with x = k·ln2 + r, |r| <= ln2/2 (ln2 split so k·ln2_hi is exact), e^r - 1 by
# its degree-7 Taylor polynomial (truncation 2^-32 relative); expm1 keeps 2^k·(e^r - 1) +
# (2^k - 1) apart so it does not cancel near 0; tanh(x) = m/(m + 2), m = expm1(2|x|),
# saturated past 9 (tanh(9) rounds to 1 in float).
_FLOAT_VECTOR = """
RLX_INLINE float rlx_expm1r_f(float r) {
    return r + r * r * (0.5f + r * (0.16666667f + r * (0.041666668f + r * (0.008333334f
           + r * (0.0013888889f + r * 0.0001984127f)))));
}
RLX_INLINE float rlx_expm1_f(float x) {   /* x <= 88 (callers clamp); NaN kept */
    float t = fmax(x, -87.0f);
    float k = rint(t * 1.44269504f);
    float r = (t - k * 0.693359375f) + k * 2.12194440e-4f;
    float s = as_float(((int)k + 127) << 23);
    float y = s * rlx_expm1r_f(r) + (s - 1.0f);
    return x == x ? y : x;
}
/* x <= 0 (the sigmoid's e^-|x|); results below 2^-126 flush to 0 */
RLX_INLINE float rlx_exp_f(float x) {
    float t = fmax(x, -87.0f);
    float k = rint(t * 1.44269504f);
    float r = (t - k * 0.693359375f) + k * 2.12194440e-4f;
    float y = as_float(((int)k + 127) << 23) * (1.0f + rlx_expm1r_f(r));
    return x >= -87.0f ? y : (x == x ? 0.0f : x);
}
RLX_INLINE float rlx_sigmoid_f(float x) {
    float e = rlx_exp_f(-fabs(x));
    float p = 1.0f / (1.0f + e);
    return x >= 0.0f ? p : (x == x ? e * p : x);
}
RLX_INLINE float rlx_tanh_f(float x) {
    float m = rlx_expm1_f(2.0f * fmin(fabs(x), 9.0f));
    float t = m / (m + 2.0f);
    return x == x ? copysign(t, x) : x;
}
"""

_FLOAT_HELPERS = """
RLX_INLINE T rlx_relu_S(T x) { return x > (T)0 ? x : (T)0; }
RLX_INLINE T rlx_sign_S(T x) { return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (T)0); }
RLX_INLINE T rlx_softplus_S(T x) {
    return x == x ? fmax(x, (T)0) + log1p(exp(-fabs(x))) : x;
}
RLX_INLINE T rlx_fmax_S(T a, T b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == (T)0 && b == (T)0) return a + b;
    return a > b ? a : b;
}
RLX_INLINE T rlx_fmin_S(T a, T b) {
    if (a != a) return b;
    if (b != b) return a;
    if (a == (T)0 && b == (T)0) return -((-a) + (-b));
    return a < b ? a : b;
}
RLX_INLINE long rlx_f2l_S(T x) {      /* the spec's NaN -> 0, spelled out: not every
                                      implementation's saturating convert honours it */
    return x != x ? 0L : convert_long_sat_rtz(x);
}
"""

_INT_HELPERS = """
RLX_INLINE long rlx_idiv_l(__global int* err, int code, long a, long b) {
    if (b == 0) { *err = code + 2; return 0; }
    if (b == -1) return (long)(0UL - (ulong)a);      /* LONG_MIN / -1 wraps, no trap */
    return a / b;
}
RLX_INLINE long rlx_imod_l(__global int* err, int code, long a, long b) {
    if (b == 0) { *err = code + 2; return 0; }
    if (b == -1) return 0;
    return a % b;
}
RLX_INLINE long rlx_ipow_l(__global int* err, int code, long a, long b) {
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
RLX_INLINE float rlx_rnd_f16(float x) {     /* round to the nearest half, kept as float */
    ushort h;                           /* half storage without cl_khr_fp16 */
    vstore_half_rte(x, 0, (__private half*)&h);
    return vload_half(0, (__private const half*)&h);
}
RLX_INLINE float rlx_bf16_load(ushort b) { return as_float((uint)b << 16); }
RLX_INLINE float rlx_rnd_bf16(float x) {    /* nearest bfloat16, ties to even */
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    return as_float(u & 0xffff0000u);
}
RLX_INLINE ushort rlx_bf16_bits(float x) { return (ushort)(as_uint(x) >> 16); }
"""


# Helpers are forced inline where the compiler knows how (clang-based ones: PoCL, AMD,
# Intel, Apple): PoCL left three-deep helper calls (tanh → expm1 → polynomial) as calls,
# which kept the work-item loop from vectorizing (the gelu chain: 230 ms instead of 38).
_INLINE = """#ifdef __clang__
#define RLX_INLINE inline __attribute__((always_inline))
#else
#define RLX_INLINE inline
#endif
"""


def prelude(fp64: bool) -> str:
    """The helpers for one program: float always, double when the device has fp64."""
    parts = [_INLINE]
    if fp64:
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
    parts.append(_FLOAT_VECTOR)
    parts.append(_FLOAT_HELPERS.replace("T", "float").replace("_S(", "_f("))
    if fp64:
        parts.append((_LIBM_HELPERS + _FLOAT_HELPERS).replace("T", "double")
                     .replace("_S(", "_d("))
    parts.append(_INT_HELPERS)
    parts.append(_SIXTEEN)
    return "".join(parts)
