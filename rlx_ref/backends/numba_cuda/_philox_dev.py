"""RLX's Philox4x32-10 (``ops/_philox.py``) as CUDA device functions.

All arithmetic is u64 with u64 constants (a signed operand would promote to float64), so
the words are bit-exact with the oracle on the GPU and in the simulator. ``_mul32`` is an f32
product with an explicit rounding mode (libdevice's ``fmul_rn``, PTX ``mul.rn.f32``), which
NVVM and ptxas never contract with the following add into a fused multiply-add: that would
round once where the oracle's separate f32 operations round twice. (A product taken in f64
and rounded is folded back into a plain f32 multiply by NVVM, then fused.)
"""
import numpy as np
from numba import cuda

from ...ops import _philox
from .device import simulator_active

_DJ = {"device": True} if simulator_active() else {"device": True, "forceinline": True}
_MASK = np.uint64(0xFFFFFFFF)
_M0 = np.uint64(_philox.M0)
_M1 = np.uint64(_philox.M1)
_W0 = np.uint64(_philox.W0)
_W1 = np.uint64(_philox.W1)
_S32 = np.uint64(32)
_S8 = np.uint64(8)
_INV24 = np.float32(2.0 ** -24)
TINY = np.float32(np.finfo(np.float32).tiny)
TWO_PI = np.float32(2.0) * np.float32(np.pi)

__all__ = ["_philox_block", "_philox_lane", "_philox_word", "_unit24", "_mul32"]


@cuda.jit(**_DJ)
def _philox_block(b, k0, k1):
    """The four words of block ``b`` (counter [b lo, b hi, 0, 0]) under key (k0, k1)."""
    s0 = np.uint64(b) & _MASK
    s1 = np.uint64(b) >> _S32
    s2 = np.uint64(0)
    s3 = np.uint64(0)
    for _ in range(10):
        p0 = s0 * _M0
        p1 = s2 * _M1
        s0, s1, s2, s3 = (p1 >> _S32) ^ s1 ^ k0, p1 & _MASK, (p0 >> _S32) ^ s3 ^ k1, p0 & _MASK
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return s0, s1, s2, s3


@cuda.jit(**_DJ)
def _philox_lane(w, i):
    if i == 0:
        return w[0]
    if i == 1:
        return w[1]
    if i == 2:
        return w[2]
    return w[3]


@cuda.jit(**_DJ)
def _philox_word(t, k0, k1):
    """Word ``t`` of the stream."""
    return _philox_lane(_philox_block(t // 4, k0, k1), t % 4)


@cuda.jit(**_DJ)
def _unit24(w):
    """``next_f32``: the top 24 bits over 2^24, exact in f32."""
    return np.float32(w >> _S8) * _INV24


if simulator_active():
    @cuda.jit(**_DJ)
    def _mul32(a, b):
        """``a * b`` of two f32 values rounded to f32 (numpy's f32 product)."""
        return np.float32(a) * np.float32(b)
else:
    from numba.cuda import libdevice

    @cuda.jit(**_DJ)
    def _mul32(a, b):
        """``a * b`` of two f32 values rounded to f32, never fused with a later add."""
        return libdevice.fmul_rn(np.float32(a), np.float32(b))
