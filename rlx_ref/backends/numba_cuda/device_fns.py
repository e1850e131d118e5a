"""CUDA device functions the generated kernels call (the "py" dialect's helpers).

The scalar formulas in ``codegen/scalar.py`` call ``_sigmoid``, ``_fmax``, ``_idiv``... ;
on the CPU they are ``@njit`` helpers pasted into each kernel (``numba_cpu/prelude.py``).
Here they are one module of ``cuda.jit(device=True)`` functions that every generated
kernel imports: each helper is compiled once per signature and process, then inlined by
NVVM (``forceinline``) into every kernel that calls it, so kernels stay as fast as if the
helpers were pasted in and a process compiles hundreds of kernels far sooner.

Every function is written so the CUDA simulator, which runs it as Python, gives the IEEE
answer too: divisions by zero are handled explicitly and ``math`` is ``sim_math`` there.
16-bit floats are carried as their bits; ``_widen16``/``_narrow16`` convert exactly
(round to nearest even, overflow to ±inf, subnormals kept).
"""
# x != x is the NaN test that also compiles for the GPU; max/min would not keep NaN rules
# ruff: noqa: PLR0124, FURB136
import numpy as np
from numba import cuda

from .device import kernel_math, simulator_active

math = kernel_math()
# the simulator's jit takes no forceinline (it runs device functions as Python anyway)
_DJ = {"device": True} if simulator_active() else {"device": True, "forceinline": True}

__all__ = [
    '_bf2f',
    '_block_sum',
    '_ceil',
    '_div',
    '_f2bf',
    '_f2h',
    '_f2i64',
    '_f2i_sat',
    '_f_from_i',
    '_fail',
    '_floor',
    '_fma64',
    '_fmax',
    '_fmin',
    '_fmod',
    '_h2f',
    '_idiv',
    '_imod',
    '_ipow',
    '_log',
    '_narrow16',
    '_near2x',
    '_offset',
    '_pow',
    '_relu',
    '_rint',
    '_rnd_bf16',
    '_rnd_f16',
    '_shl64',
    '_sigmoid',
    '_sign',
    '_softplus',
    '_sqrt',
    '_verf',
    '_vexp',
    '_vexpm1',
    '_vlog1p',
    '_vtanh',
    '_widen16',
]

@cuda.jit(**_DJ)
def _fail(err, tag, code):
    # the smallest (node position, code) wins, so the host names the first failing node
    cuda.atomic.min(err, 0, tag * 8 + code)


@cuda.jit(**_DJ)
def _rint(x):
    a = abs(x)
    if a < 4503599627370496.0:                  # below 2**52: + 2**52 rounds to even
        return math.copysign((a + 4503599627370496.0) - 4503599627370496.0, x)
    return x


@cuda.jit(**_DJ)
def _floor(x):
    r = _rint(x)
    return r - 1.0 if r > x else r


@cuda.jit(**_DJ)
def _ceil(x):
    r = _rint(x)
    r = r + 1.0 if r < x else r
    return math.copysign(r, x) if r == 0.0 else r


@cuda.jit(**_DJ)
def _div(a, b):
    if b == 0.0:
        if a != a or a == 0.0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


@cuda.jit(**_DJ)
def _vexp(x):
    return math.exp(x)


@cuda.jit(**_DJ)
def _verf(x):
    return math.erf(x)


@cuda.jit(**_DJ)
def _vexpm1(x):
    return math.expm1(x)


@cuda.jit(**_DJ)
def _vlog1p(x):
    return math.log1p(x)


@cuda.jit(**_DJ)
def _vtanh(x):
    return math.tanh(x)


@cuda.jit(**_DJ)
def _sigmoid(x):
    e = math.exp(-abs(x))
    r = 1.0 / (1.0 + e)
    return r if x >= 0.0 else (e * r if x == x else x)


@cuda.jit(**_DJ)
def _relu(x):
    return x if x > 0.0 else 0.0                # NaN → 0, as the oracle


@cuda.jit(**_DJ)
def _log(x):
    if x > 0.0:
        return math.log(x)
    if x == 0.0:
        return -math.inf
    return math.nan if x == x else x


@cuda.jit(**_DJ)
def _sqrt(x):
    if x >= 0.0:
        return math.sqrt(x)
    return math.nan


@cuda.jit(**_DJ)
def _sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0


@cuda.jit(**_DJ)
def _softplus(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x))) if x == x else x


@cuda.jit(**_DJ)
def _fmax(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == 0.0 and b == 0.0:
        return a + b
    return a if a > b else b


@cuda.jit(**_DJ)
def _fmin(a, b):
    if a != a:
        return b
    if b != b:
        return a
    if a == 0.0 and b == 0.0:
        return -((-a) + (-b))
    return a if a < b else b


@cuda.jit(**_DJ)
def _pow(a, b):
    return math.pow(a, b)


@cuda.jit(**_DJ)
def _fmod(a, b):
    return math.fmod(a, b)


@cuda.jit(**_DJ)
def _f2i64(x):
    if x != x:
        return np.int64(0)
    if x >= 9.2233720368547758e18:
        return np.int64(9223372036854775807)
    if x <= -9.2233720368547758e18:
        return np.int64(-9223372036854775807 - 1)
    return np.int64(x)


@cuda.jit(**_DJ)
def _f_from_i(i):
    return np.float64(i)


@cuda.jit(**_DJ)
def _shl64(a, n):
    return a << (n & 63)


@cuda.jit(**_DJ)
def _idiv(a, b):
    # the kernel flags b == 0 before calling; 0 keeps the lane well defined meanwhile
    if b == 0:
        return a - a
    if b == -1:         # MIN / -1 wraps to MIN; the hardware divide would trap
        return -a
    # floor quotient, moved up when inexact with mixed signs; abs() would wrap at MIN
    q = a // b
    return q + 1 if a % b != 0 and (a < 0) != (b < 0) else q


@cuda.jit(**_DJ)
def _imod(a, b):
    if b == 0:
        return a - a
    return a - _idiv(a, b) * b


@cuda.jit(**_DJ)
def _ipow(a, b):
    r = a - a + 1
    if b < 0:
        return r - r                            # flagged by the kernel
    base = a
    while b > 0:
        if b & 1:
            r = r * base
        base = base * base
        b >>= 1
    return r


@cuda.jit(**_DJ)
def _f2i_sat(x, lo, hi):
    if x != x:
        return np.int64(0)
    if x <= lo:
        return np.int64(lo)
    if x >= hi:
        return np.int64(hi)
    return np.int64(math.trunc(x))


@cuda.jit(**_DJ)
def _widen16(b, man, bias, emask):
    # the value of a 16-bit float's bits (f16: 10, 15, 31; bf16: 7, 127, 255), as f64
    b = np.int64(b)
    s = -1.0 if b & 0x8000 else 1.0
    e = (b >> man) & emask
    f = b & ((1 << man) - 1)
    if e == 0:
        return s * math.ldexp(np.float64(f), 1 - bias - man)
    if e == emask:
        return s * math.inf if f == 0 else math.nan
    return s * math.ldexp(np.float64(f + (1 << man)), e - bias - man)


@cuda.jit(**_DJ)
def _narrow16(x, man, bias, emask):
    # the bits of x rounded to nearest even in a 16-bit float format
    if x != x:
        return np.uint16((emask << man) | (1 << (man - 1)))
    sign = 0x8000 if math.copysign(1.0, x) < 0.0 else 0
    a = abs(x)
    if a == math.inf:
        return np.uint16(sign | (emask << man))
    if a < math.ldexp(1.0, 1 - bias):           # subnormal: units of 2**(1 - bias - man)
        q = _rint(math.ldexp(a, bias - 1 + man))
        return np.uint16(sign | np.int64(q))
    m, e = math.frexp(a)                        # a = m * 2**e, 0.5 <= m < 1
    q = _rint(math.ldexp(m, man + 1))
    field = e - 1 + bias
    if q == math.ldexp(1.0, man + 1):
        q = math.ldexp(1.0, man)
        field += 1
    if field >= emask:
        return np.uint16(sign | (emask << man))
    return np.uint16(sign | (field << man) | (np.int64(q) - (1 << man)))


@cuda.jit(**_DJ)
def _h2f(b):
    return _widen16(b, 10, 15, 31)


@cuda.jit(**_DJ)
def _bf2f(b):
    return _widen16(b, 7, 127, 255)


@cuda.jit(**_DJ)
def _f2h(x):
    return _narrow16(x, 10, 15, 31)


@cuda.jit(**_DJ)
def _f2bf(x):
    return _narrow16(x, 7, 127, 255)


@cuda.jit(**_DJ)
def _rnd_f16(x):
    return _h2f(_f2h(x))


@cuda.jit(**_DJ)
def _rnd_bf16(x):
    return _bf2f(_f2bf(x))


@cuda.jit(**_DJ)
def _offset(i, dims, strides):
    # the element offset of flat output index i in an operand with per-axis strides
    j = 0
    r = i
    for ax in range(dims.size - 1, -1, -1):
        d = dims[ax]
        j += (r % d) * strides[ax]
        r //= d
    return j


@cuda.jit(**_DJ)
def _near2x(i, dims):
    # the element of a [.., h, w] input that nearest-2x upsampling puts at output index i
    rank = dims.size
    big_h = dims[rank - 2]
    big_w = dims[rank - 1]
    col = i % big_w
    r = i // big_w
    row = r % big_h
    plane = r // big_h
    return (plane * (big_h // 2) + row // 2) * (big_w // 2) + col // 2


@cuda.jit(**_DJ)
def _block_sum(sm, v):
    # the sum of v over the block (every thread gets it); blockDim.x is a power of two
    t = cuda.threadIdx.x
    sm[t] = v
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    total = sm[0]
    cuda.syncthreads()
    return total


if simulator_active():
    _fma64 = math.fma          # the simulator's cuda.fma rounds twice; this rounds once
else:
    @cuda.jit(**_DJ)
    def _fma64(a, b, c):
        return cuda.fma(a, b, c)
