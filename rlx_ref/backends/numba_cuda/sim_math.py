"""The ``math`` module generated kernels see under the CUDA simulator.

On a GPU, ``math.exp(1000.0)`` is inf and ``math.log(-1.0)`` NaN (libdevice, IEEE). The
simulator runs kernels as Python, where the same calls raise OverflowError/ValueError.
These twins give the IEEE answers as numpy scalars (IEEE arithmetic too), so a kernel
behaves the same on both. Integer-valued functions (trunc, floor, ceil) keep Python's
int results, as Numba's CUDA target does.
"""
from __future__ import annotations

import math as _m

import numpy as _np

inf, nan, pi, e = _m.inf, _m.nan, _m.pi, _m.e


def _ieee(ufunc):
    def f(*args):
        with _np.errstate(all="ignore"):
            return _np.float64(ufunc(*(_np.float64(a) for a in args)))
    f.__name__ = ufunc.__name__
    return f


exp, log, sqrt, tanh, expm1, log1p = map(_ieee, (_np.exp, _np.log, _np.sqrt, _np.tanh,
                                                 _np.expm1, _np.log1p))
sin, cos, tan, atan, atan2 = map(_ieee, (_np.sin, _np.cos, _np.tan, _np.arctan, _np.arctan2))
fmod, pow, fabs, copysign = map(_ieee, (_np.fmod, _np.power, _np.fabs, _np.copysign))
log2, log10, exp2 = map(_ieee, (_np.log2, _np.log10, _np.exp2))
sinh, cosh = map(_ieee, (_np.sinh, _np.cosh))
isnan, isinf, isfinite = _m.isnan, _m.isinf, _m.isfinite


def erf(x):
    return _np.float64(_m.erf(float(x)))        # ±1 at ±inf, NaN at NaN


def ldexp(x, i):
    with _np.errstate(all="ignore"):
        return _np.ldexp(_np.float64(x), int(i))


def frexp(x):
    m, ex = _np.frexp(_np.float64(x))
    return m, int(ex)


def trunc(x):
    return _m.trunc(float(x))


def floor(x):
    return _m.floor(float(x))


def ceil(x):
    return _m.ceil(float(x))


def fma(a, b, c):
    """a*b + c rounded once, as the GPU's fma instruction (exact rational arithmetic)."""
    from fractions import Fraction

    x, y, z = float(a), float(b), float(c)
    if not all(map(_m.isfinite, (x, y, z))):
        with _np.errstate(all="ignore"):
            return _np.float64(x) * _np.float64(y) + _np.float64(z)
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    try:
        return _np.float64(float(exact))
    except OverflowError:
        return _np.float64(inf if exact > 0 else -inf)
