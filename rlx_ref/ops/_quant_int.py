"""Integer arithmetic of the quant family, as RLX's CPU kernels do it.

RLX (``rlx-cpu/src/thunk/ops/quant.rs``, ``exec_q_mat_mul`` / ``exec_quantize``, and the
QConv2d kernel) requantizes with ``(acc as f32 * mult).round() as i32 + out_zp`` clamped to
``[-128, 127]``: the i32 accumulator rounded to f32, one f32 product, Rust's ``round``
(half away from zero), a saturating cast (NaN gives 0). Quantize is
``(x * (1 / scale)).round() as i32 + zp``, with the reciprocal rounded to f32 first.
"""
from __future__ import annotations

import numpy as np

_I32_MIN, _I32_MAX = -2**31, 2**31 - 1


def round_half_away(v32: np.ndarray) -> np.ndarray:
    """Rust's ``f32::round`` as float64: ties go away from zero (np.round goes to even).

    The f32 value is exact in f64 and so is ``|v| + 0.5``, so ``floor`` cannot round up a
    value just below a half as ``v + 0.5`` in f32 would.
    """
    v = np.asarray(v32, np.float32).astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def saturate_i32(r: np.ndarray) -> np.ndarray:
    """Rust's ``as i32`` on a float: NaN is 0, out-of-range values saturate."""
    r = np.where(np.isnan(r), 0.0, r)
    return np.clip(r, _I32_MIN, _I32_MAX).astype(np.int64)


def to_i8(r: np.ndarray, zp) -> np.ndarray:
    """``r + zp`` clamped to i8, added in i64 (RLX's i32 sum would wrap past i32::MAX)."""
    return np.clip(np.asarray(r, np.int64) + np.asarray(zp, np.int64), -128,
                   127).astype(np.int8)


def requantize(acc: np.ndarray, mult: float, out_zp: int) -> np.ndarray:
    """i32 accumulator -> i8: ``clamp(round(f32(acc) * mult) + out_zp, -128, 127)``."""
    with np.errstate(all="ignore"):
        v = np.asarray(acc, np.int64).astype(np.float32) * np.float32(mult)
    return to_i8(saturate_i32(round_half_away(v)), out_zp)


def quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """f32 -> i8: ``clamp(round(x * f32(1 / scale)) + zp, -128, 127)`` in f32 arithmetic."""
    with np.errstate(all="ignore"):
        inv = np.float32(1) / np.asarray(scale, np.float32)
        v = np.asarray(x, np.float32) * inv
    return to_i8(saturate_i32(round_half_away(v)), zp)


def along(vec, axis, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast along ``axis`` (per-tensor: a scalar)."""
    vec = np.asarray(vec)
    if axis is None:
        return vec.reshape(())
    shape = [1] * ndim
    shape[axis] = vec.size
    return vec.reshape(shape)
