"""CUDA device helpers of the integer quant ops and of DequantMatMul's 4-operand forms.

Requantization is RLX's: ``round(f32 value)`` half away from zero, saturated to i32 (NaN
gives 0), plus the zero point, clamped to i8. The f32 value is exact in f64, so the
rounding is done there without a tie error. Code tables are the scheme records' own
(``rlx_ref.quant.linear``), baked into the kernels as constant arrays.
"""
# ruff: noqa: PLR0124
import numpy as np
from numba import cuda

from ...quant.linear import E2M1, E4M3, E4M3_SCALE, E5M2
from ._quant_device import _DJ, _pow2, math
from .device import simulator_active
from .device_fns import _floor

_E4M3 = E4M3.astype(np.float32)
_E5M2 = E5M2.astype(np.float32)
_E4M3S = E4M3_SCALE.astype(np.float32)
_E2M1 = E2M1.astype(np.float32)


@cuda.jit(**_DJ)
def _round_sat(v):
    # Rust's ``(v as f32).round() as i32`` widened to i64: ties away, NaN 0, saturating
    if v != v:
        return np.int64(0)
    a = _floor(abs(np.float64(v)) + 0.5)
    r = -a if v < 0 else a
    if r >= 2147483647.0:
        return np.int64(2147483647)
    if r <= -2147483648.0:
        return np.int64(-2147483648)
    return np.int64(r)


@cuda.jit(**_DJ)
def _to_i8(r, zp):
    # r + zp clamped to i8 (added in i64: the i32 sum could wrap)
    s = r + np.int64(zp)
    return np.int8(min(max(s, -128), 127))


@cuda.jit(**_DJ)
def _requant(acc, mult, zp):
    # i64 accumulator -> i8: round(f32(acc) * mult) + zp, one f32 rounding per step
    return _to_i8(_round_sat(np.float32(acc) * np.float32(mult)), zp)


if simulator_active():
    @cuda.jit(**_DJ)
    def _mul_rn(a, b):
        # the simulator multiplies numpy f32 scalars: one rounding, never fused
        return np.float32(a) * np.float32(b)
else:
    from numba.cuda import libdevice as _libdevice

    @cuda.jit(**_DJ)
    def _mul_rn(a, b):
        # mul.rn.f32: a product the code generator may not fuse into a following add
        return _libdevice.fmul_rn(np.float32(a), np.float32(b))


@cuda.jit(**_DJ)
def _e8m0(c):
    # an MX E8M0 scale byte: 2**(c - 127) (255 is inf)
    if c == 255:
        return np.float32(math.inf)
    return _pow2(np.int32(c) - 127)


@cuda.jit(**_DJ)
def _bits(w, f, bits):
    # code f of a little-endian bit stream of ``bits``-bit codes (MLX's packs)
    o = f * bits
    at = o >> 3
    sh = o & 7
    u = np.int32(w[at])
    if sh + bits > 8:
        u |= np.int32(w[at + 1]) << 8
    return (u >> sh) & ((1 << bits) - 1)
