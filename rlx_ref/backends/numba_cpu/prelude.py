"""Scalar helpers pasted at the top of every elementwise kernel (Numba dialect).

They pin down the semantics numpy's ufuncs have and Python's operators do not: NaN-aware
max/min with -0 < +0, truncating integer division that raises on zero, saturating
float→int conversion, sign(NaN) = 0, and stable sigmoid/softplus. exp/tanh/sigmoid/log/
log1p come from ``_vmath`` (branch-free, vectorizable; ``math.exp`` and the like are libm
calls).
"""
from ._vmath import VMATH

PRELUDE = VMATH + '''
_NJ = dict(inline="always", error_model="numpy", cache=True)


@njit(**_NJ)
def _sigmoid(x):
    return _vsigmoid(x)     # branch-free, vectorizable (_vmath)


@njit(**_NJ)
def _relu(x):
    return x if x > 0.0 else 0.0


@njit(**_NJ)
def _log(x):
    return _vlog(x)         # log(0) = -inf, log(<0) = NaN, NaN kept (_vmath)


@njit(**_NJ)
def _sqrt(x):
    if x >= 0.0:
        return math.sqrt(x)
    return math.nan


@njit(**_NJ)
def _sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0


@njit(**_NJ)
def _softplus(x):
    return max(x, 0.0) + _vlog1p(_vexp(-abs(x))) if x == x else x


@njit(**_NJ)
def _fmax(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == 0.0 and b == 0.0:
        return a + b
    return a if a > b else b


@njit(**_NJ)
def _fmin(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == 0.0 and b == 0.0:
        return -((-a) + (-b))
    return a if a < b else b


@njit(**_NJ)
def _div(a, b):
    return a / b


@njit(**_NJ)
def _pow(a, b):
    return a ** b


@njit(**_NJ)
def _fmod(a, b):
    return np.fmod(a, b)


@njit(**_NJ)
def _f2i64(x):
    if x != x:
        return np.int64(0)
    if x >= 9.2233720368547758e18:
        return np.int64(9223372036854775807)
    if x <= -9.2233720368547758e18:
        return np.int64(-9223372036854775807 - 1)
    return np.int64(x)


@njit(**_NJ)
def _f_from_i(i):
    return np.float64(i)


@njit(**_NJ)
def _shl64(a, n):
    return a << (n & 63)


@njit(**_NJ)
def _idiv(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    if b == -1:         # MIN / -1 wraps to MIN; the hardware divide would trap
        return -a
    # floor quotient, moved up when inexact with mixed signs; abs() would wrap at MIN
    q = a // b
    return q + 1 if a % b != 0 and (a < 0) != (b < 0) else q


@njit(**_NJ)
def _imod(a, b):
    if b == 0:
        raise ZeroDivisionError("integer modulo by zero")
    return a - _idiv(a, b) * b


@njit(**_NJ)
def _ipow(a, b):
    if b < 0:
        raise ValueError("integer Pow with a negative exponent")
    r = a - a + 1
    base = a
    while b > 0:
        if b & 1:
            r = r * base
        base = base * base
        b >>= 1
    return r


@njit(**_NJ)
def _f2i_sat(x, lo, hi):
    if x != x:
        return 0
    t = math.trunc(x) if abs(x) < 4.0e18 else x   # larger floats are integral already
    if t <= lo:
        return lo
    if t >= hi:
        return hi
    return np.int64(t)
'''

PRELUDE += '''

@njit(**_NJ)
def _rnd_bits(x, bits, min_q, max_v):
    # round an f64 to the nearest value with `bits` significant bits (ties to even),
    # smallest spacing 2**min_q, overflowing to ±inf past max_v: f16 and bf16 storage
    if x != x or x == 0.0 or abs(x) == math.inf:
        return x
    m, e = math.frexp(x)
    q = max(e - bits, min_q)
    step = math.ldexp(1.0, q)
    r = np.rint(x / step) * step
    if abs(r) > max_v:
        return math.copysign(math.inf, x)
    return r


@njit(**_NJ)
def _rnd_f16(x):
    return _rnd_bits(x, 11, -24, 65504.0)


@njit(**_NJ)
def _rnd_bf16(x):
    return _rnd_bits(x, 8, -133, 3.3895313892515355e38)
'''
