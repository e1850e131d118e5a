"""Branch-free exp (f64 and f32) / expm1 / tanh / sigmoid / log / log1p / erf that LLVM can
vectorize (Numba).

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
erf (``_verf``) has two pieces selected per element: x·P(x²) for |x| < 1 (degree 12) and
1 - e^(-x²)·R(|x|) for 1 <= |x| < 6, R = erfc·e^(x²) of degree 28 in t = (2|x| - 7)/5,
both evaluated by Estrin's scheme (Horner's chain of dependent steps ran 5x slower); ±1 beyond (erfc(6) < 2^-55). Coefficients from
``scripts/derive_erf.py`` (60-digit interpolation; relative error of the pieces 1.5e-19 and
4e-17); the result is within about 1 ulp of f64 (the e^(-x²) rounding is scaled by
erfc <= 0.16, so it stays below a quarter ulp of erf).
"""
from ..codegen.literal import py_float

# |x| < 1: erf(x) = x·P(x²), coefficients of s^0 .. s^12
_VERF_P = (1.1283791670955126, -0.3761263890318375, 0.11283791670954879,
           -0.026866170645076792, 0.0052239776248180145, -0.000854832698083379,
           0.0001205533111164271, -1.4925595266831182e-05, 1.6461000484121368e-06,
           -1.6350312701054695e-07, 1.4659775274047436e-08, -1.1372848856791674e-09,
           5.957176147748911e-11)
# 1 <= |x| < 6: erfc(x)·e^(x²), coefficients of t^0 .. t^28, t = (2|x| - 7)/5
_VERF_R = (0.1552936556088943, -0.10330894458313108, 0.06663208245319104,
           -0.04176678811945303, 0.02549555964371531, -0.015182511544736937,
           0.008833423916019923, -0.005028067985897489, 0.002803326193753514,
           -0.0015325155208559278, 0.0008222551763227133, -0.0004333630245212691,
           0.00022453048643318593, -0.00011443636902313971, 5.741823232072277e-05,
           -2.8395881636091154e-05, 1.3828928244542998e-05, -6.597721129314622e-06,
           3.1285932958036703e-06, -1.5335203223793152e-06, 7.043754988574408e-07,
           -2.4029191446724603e-07, 1.1143084433615192e-07, -1.1370578545985852e-07,
           4.825961898969941e-08, 1.2368852435201621e-08, -4.723529684323121e-09,
           -8.27808017002486e-09, 3.403549128809476e-09)


def _estrin(name: str, coefs, var: str, head: int = 0) -> list:
    """Source lines setting ``name`` to the polynomial ``coefs`` (constant first) of
    ``var``: the ``head`` lowest terms by Horner's rule (their rounding is what the result
    keeps) around the rest by Estrin's scheme: pairs ``c0 + c1·v``, then pairs of those
    with v², v⁴, ... (a tree of depth log2(n) instead of Horner's chain of n steps)."""
    if head:
        lines = _estrin(f"{name}_t", coefs[head:], var)
        acc = f"{name}_t"
        for c in reversed(coefs[:head]):
            acc = f"({py_float(c)} + {var} * {acc})"
        return lines + [f"    {name} = {acc}"]
    terms = [f"({py_float(coefs[i])} + {py_float(coefs[i + 1])} * {var})"
             if i + 1 < len(coefs) else py_float(coefs[i]) for i in range(0, len(coefs), 2)]
    lines, power, level = [], var, 0
    while len(terms) > 1:
        level += 1
        nxt = f"{name}_v{level}"
        lines.append(f"    {nxt} = {power} * {power}")
        power = nxt
        pairs = []
        for i in range(0, len(terms), 2):
            t = f"{name}_{level}_{i // 2}"
            rhs = terms[i] if i + 1 == len(terms) else f"{terms[i]} + {terms[i + 1]} * {power}"
            lines.append(f"    {t} = {rhs}")
            pairs.append(t)
        terms = pairs
    return lines + [f"    {name} = {terms[0]}"]


def _erf_source() -> str:
    """``_verf`` as straight-line code (both polynomials unrolled by ``_estrin``), which
    the loop vectorizer takes whole."""
    lines = ["", "", "@njit(**_VM)", "def _verf(x):",
             "    a = abs(x)",
             "    s = a * a",
             *_estrin("p", _VERF_P, "s", head=3),
             "    small = x * p",
             "    # 1 <= |x| < 6 (clamped there; outside, the select discards it)",
             "    b = a if a > 1.0 else 1.0",
             "    b = b if b < 6.0 else 6.0",
             "    t = (b + b - 7.0) * 0.2",
             *_estrin("r", _VERF_R, "t", head=3),
             "    big = 1.0 - _vexp(-(b * b)) * r",
             "    big = big if a < 6.0 else 1.0",
             "    y = small if a < 1.0 else (big if x > 0.0 else -big)",
             "    return y if x == x else x", ""]
    return "\n".join(lines)


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


@njit(**_VM)
def _vlog(x):
    # log(x) = e·ln2 + log(m), m in [sqrt(1/2), sqrt(2)) from the exponent bits (subnormals
    # scaled by 2^54 first); log(m) = 2·atanh(s) = 2s·(1 + s²/3 + s⁴/5 + ...), s = (m-1)/(m+1),
    # |s| <= 0.1716: eleven terms of the series leave 6e-19 out
    sub = x < 2.2250738585072014e-308
    y = x * 18014398509481984.0 if sub else x
    bits = np.float64(y).view(np.int64)
    e = ((bits >> 52) & 2047) - 1023
    m = np.int64((bits & 4503599627370495) | 4607182418800017408).view(np.float64)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    e = e - 54 if sub else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    q = ((0.3333333333333333 + z * 0.2) + z2 * (0.14285714285714285 + z * 0.1111111111111111)
         + z4 * ((0.09090909090909091 + z * 0.07692307692307693)
                 + z2 * (0.06666666666666667 + z * 0.058823529411764705))
         + z4 * z4 * ((0.05263157894736842 + z * 0.047619047619047616)
                      + z2 * 0.043478260869565216))
    lm = s + s + (s + s) * (z * q)
    k = np.float64(e)
    r = k * 0.6931471803691238 + (k * 1.9082149292705877e-10 + lm)
    r = r if x > 0.0 else (-np.inf if x == 0.0 else np.nan)
    r = r if x < np.inf else x
    return r if x == x else x


@njit(**_VM)
def _vlog1p(y):
    # log(1 + y) = log(u) + c/u to first order, u = 1 + y rounded and c = y - (u - 1) what
    # the rounding dropped (exact); ±0 keeps its sign, u = 0 or inf is log(u) itself
    u = 1.0 + y
    c = y - (u - 1.0)
    lu = _vlog(u)
    r = lu + c / u
    r = r if u > 0.0 and u < np.inf else lu
    return r if y != 0.0 else y
''' + _erf_source()
