"""Branch-free f64 exp / expm1 / tanh / sigmoid that LLVM can vectorize (Numba dialect).

Numba lowers ``math.exp``/``math.tanh`` to scalar libm calls (this llvmlite has no SVML), so a
loop calling them never vectorizes. ``VMATH`` is source text pasted into generated kernels
(the elementwise prelude): every function is straight-line f64/i64 arithmetic with selects
(``a if c else b`` on scalars becomes an LLVM ``select``), no calls and no data-dependent
branches, and is inlined into the caller's loop.

exp: Cody-Waite reduction x = k·ln2 + r (|r| <= ln2/2, ln2 split hi/lo so k·ln2_hi is exact),
e^r by its degree-13 Taylor polynomial (truncation < 2^-58, about 1 ulp of f64 in all), and
2^k built from exponent bits as 2^k1·2^k2 (k1 + k2 = k, both normal), so results that
overflow give inf and results in the subnormal range are rounded once. Valid on the whole
float range: ±inf, NaN (propagated by a final select), ±0 and subnormal inputs.
expm1 is 2^k·(e^r - 1) + (2^k - 1), both parts exact-ish, so there is no cancellation near 0;
tanh(x) = sign(x)·m/(m + 2) with m = expm1(2|x|) (|x| clamped at 20, where tanh is 1 in f64).
"""

VMATH = '''
_VM = dict(inline="always", error_model="numpy", cache=True)


@njit(**_VM)
def _vm_pow2(k):
    # 2^k as two normal factors for an integral f64 k in [-1076, 1025]
    ki = np.int64(k)
    k1 = ki >> 1
    s1 = np.int64((k1 + 1023) << 52).view(np.float64)
    s2 = np.int64((ki - k1 + 1023) << 52).view(np.float64)
    return s1, s2


@njit(**_VM)
def _vm_reduce(x):
    # (k, r) with x = k·ln2 + r, |r| <= ln2/2, x clamped into [-746, 710]
    t = x if x > -746.0 else -746.0
    t = t if t < 710.0 else 710.0
    u = t * 1.4426950408889634 + 6755399441055744.0     # + 1.5·2^52 rounds to an integer
    k = u - 6755399441055744.0
    r = (t - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    return k, r


@njit(**_VM)
def _vm_expm1_r(r):
    # e^r - 1 for |r| <= ln2/2 (Taylor, degree 13; the leading 1 left out)
    r2 = r * r
    r4 = r2 * r2
    q0 = r + r2 * (0.5 + r * 0.16666666666666666)
    q1 = (0.041666666666666664 + r * 0.008333333333333333) + r2 * (
        0.001388888888888889 + r * 0.0001984126984126984)
    q2 = (2.48015873015873e-05 + r * 2.755731922398589e-06) + r2 * (
        2.755731922398589e-07 + r * 2.505210838544172e-08)
    q3 = 2.08767569878681e-09 + r * 1.6059043836821613e-10
    return q0 + r4 * (q1 + r4 * (q2 + r4 * q3))


@njit(**_VM)
def _vexp(x):
    k, r = _vm_reduce(x)
    s1, s2 = _vm_pow2(k)
    y = ((1.0 + _vm_expm1_r(r)) * s1) * s2
    return y if x == x else x


@njit(**_VM)
def _vexpm1(x):
    # for x <= 40 (callers clamp); 2^k·q + (2^k - 1) keeps the small-|x| accuracy
    k, r = _vm_reduce(x)
    s1, s2 = _vm_pow2(k)
    s = s1 * s2
    y = s * _vm_expm1_r(r) + (s - 1.0)
    return y if x == x else x


@njit(**_VM)
def _vtanh(x):
    a = abs(x)
    a = a if a < 20.0 else 20.0        # tanh(20) rounds to 1 in f64
    m = _vexpm1(a + a)
    t = m / (m + 2.0)
    # selects keep the sign of ±0 and propagate NaN
    return t if x > 0.0 else (-t if x < 0.0 else x)


@njit(**_VM)
def _vsigmoid(x):
    e = _vexp(-abs(x))
    r = 1.0 / (1.0 + e)
    return r if x >= 0.0 else e * r
'''
