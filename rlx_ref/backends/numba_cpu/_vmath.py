"""Branch-free exp (f64 and f32) / expm1 / tanh / sigmoid that LLVM can vectorize (Numba).

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
``_vexpf`` is the same exp in f32 arithmetic (8 lanes per AVX2 vector instead of 4) for
kernels whose working precision is f32 (softmax, f32 attention scores): ln2 split so that
k·ln2_hi is exact, a degree-6 polynomial (error 0.03 ulp; about 1 ulp in all),
results below 2^-126 flushed to +0 (their contracts allow it); ``_vexpf_le0`` is the same
for arguments <= 0 (x - max) with fewer range checks. Every kernel takes its exp from here.
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


_VF_LO = np.float32(-87.33654022216797)    # the f32 just above ln(2^-126)
_VF_HI = np.float32(88.72283172607422)     # the largest f32 whose e^x is finite in f32
_VF_LOG2E = np.float32(1.4426950408889634)
_VF_SHIFT = np.float32(12582912.0)            # 1.5·2^23: adding it rounds to an integer
_VF_LN2_HI = np.float32(0.693359375)          # 9 bits: k·ln2_hi is exact for |k| < 2^15
_VF_LN2_LO = np.float32(-2.12194440e-4)
# (e^r - 1 - r)/r² on |r| <= ln2/2, degree 4 (weighted least squares to equal ripple):
# relative error of e^r 3.8e-9 (0.03 ulp) with the coefficients rounded to f32
_VF_C0 = np.float32(0.4999999403953552)
_VF_C1 = np.float32(0.1666652113199234)
_VF_C2 = np.float32(0.04166838899254799)
_VF_C3 = np.float32(0.008368710055947304)
_VF_C4 = np.float32(0.001381461275741458)
_VF_ONE = np.float32(1.0)
_VF_ZERO = np.float32(0.0)
_VF_INF = np.float32(np.inf)


@njit(**_VM)
def _vexpf_core(t):
    # e^t for a t in [_VF_LO, _VF_HI] (never NaN: converting a NaN or out-of-range k to an
    # integer is undefined in LLVM). f32 in and out, f32 arithmetic only: an f64 constant
    # would promote the whole chain.
    u = t * _VF_LOG2E + _VF_SHIFT
    k = u - _VF_SHIFT
    r = (t - k * _VF_LN2_HI) - k * _VF_LN2_LO
    r2 = r * r
    # e^r - 1 first and the 1 added last: the sum's rounding is then the only large one
    q = r + r2 * ((_VF_C0 + r * _VF_C1) + r2 * ((_VF_C2 + r * _VF_C3) + r2 * _VF_C4))
    e = np.float32(_VF_ONE + q).view(np.int32)
    # 2^k enters as k added to e^r's exponent field: the result is normal, so no second
    # scale factor (with two, the loop ran 2.5x slower: its constants left the registers)
    return np.int32((np.int32(k) << 23) + e).view(np.float32)


@njit(**_VM)
def _vexpf(x):
    # every x: the clamps (vmaxps, vminps) also turn NaN into _VF_LO; below the normal
    # range the result flushes to +0, above it is inf, and NaN is put back at the end
    t = x if x > _VF_LO else _VF_LO
    t = t if t < _VF_HI else _VF_HI
    y = _vexpf_core(t)
    y = y if x >= _VF_LO else _VF_ZERO
    y = _VF_INF if x > _VF_HI else y
    return y if x == x else x


@njit(**_VM)
def _vexpf_le0(x):
    # x <= 0 (x - max in softmax and attention, whose rows holding NaN are NaN before any
    # exp): _vexpf's results without the upper clamp and the NaN select (NaN gives 0),
    # in 30% less time
    t = x if x > _VF_LO else _VF_LO
    y = _vexpf_core(t)
    return y if x >= _VF_LO else _VF_ZERO
'''
