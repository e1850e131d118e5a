"""IQ4_NL / IQ4_XS quantizers: llama.cpp's scale search over the non-linear 4-bit levels.

llama.cpp (ggml-quants.c, quantize_row_iq4_nl_impl as called by quantize_iq4_nl and
quantize_iq4_xs without an importance matrix) weights each element by x**2, starts from
the scale that maps the block's largest magnitude onto +127, refits it by weighted least
squares, then tries the 15 scales that map that element onto -127 + t (t = -7..7) and keeps
the one with the best weighted fit. Sums here are taken in f64, so a scale can differ from
llama.cpp's in its last bits; the codes then follow from the kept scale.
"""
from __future__ import annotations

import numpy as np

from ._blockfields import f16_bytes, join_halves

# kvalues_iq4nl (ggml-common.h): the 16 levels of the non-linear 4-bit code.
KVALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10,
                    1, 13, 25, 38, 53, 69, 89, 113], np.int8)
_KV = KVALUES.astype(np.float32)
_KV64 = _KV.astype(np.float64)
# Level index for each integer floor(2v) in [-256, 256]: the index of the level nearest v
# (ties go up, as in llama.cpp) is how many neighbour sums kv[i-1] + kv[i] are <= 2v, and
# those sums are integers, so floor(2v) decides it.
_LUT = np.searchsorted(_KV[:-1] + _KV[1:], np.arange(-256, 257), side="right").astype(np.uint8)
_NTRY = 7
_GROUP_MAX_EPS = np.float32(1e-15)    # llama.cpp: a sub-block this small quantizes to 0


def nearest_level(v: np.ndarray) -> np.ndarray:
    """Index of the level nearest to each of ``v`` (f32; ties go up, as in llama.cpp)."""
    v = np.asarray(v, np.float32)
    with np.errstate(invalid="ignore"):
        two = np.clip(np.floor(v + v), -256, 256)
    return _LUT[np.nan_to_num(two).astype(np.int32) + 256]


def _fit(xb: np.ndarray, wx: np.ndarray, w: np.ndarray, inv: np.ndarray):
    """Weighted sums sum(w q x), sum(w q q) (f64) of the codes for scale 1/inv."""
    q = _KV64[nearest_level(inv[:, None] * xb)]
    return np.einsum("ij,ij->i", wx, q), np.einsum("ij,ij,ij->i", w, q, q)


def best_scales(xb: np.ndarray) -> np.ndarray:
    """The searched scale of each 32-weight sub-block (rows of f32 ``xb``); 0 if tiny."""
    xb = np.asarray(xb, np.float32)
    rows = np.arange(xb.shape[0])
    at = np.abs(xb).argmax(axis=1)                # first largest magnitude, as in C
    mx = xb[rows, at]
    tiny = np.abs(mx) < _GROUP_MAX_EPS
    mx = np.where(tiny, np.float32(1), mx)
    w = xb.astype(np.float64) ** 2
    wx = w * xb
    with np.errstate(divide="ignore", invalid="ignore"):
        sqx, sq2 = _fit(xb, wx, w, np.float32(1) / (-mx / _KV[0]))
        d = sqx / sq2
        best = d * sqx
        for t in range(-_NTRY, _NTRY + 1):
            sqx, sq2 = _fit(xb, wx, w, (np.float32(t) + _KV[0]) / mx)
            better = (sq2 > 0) & (sqx * sqx > best * sq2)
            d = np.where(better, sqx / sq2, d)
            best = np.where(better, d * sqx, best)
    return np.where(tiny, 0.0, d).astype(np.float32)


def _codes(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Level indices of rows ``x`` under per-row ``scale`` (index of level ~0 where 0)."""
    with np.errstate(divide="ignore"):
        inv = np.where(scale != 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
    return nearest_level(inv[:, None] * x)


def quantize_iq4_nl(x: np.ndarray) -> np.ndarray:
    """f32 [n, 32] -> IQ4_NL blocks u8 [n, 18]."""
    x = np.asarray(x, np.float32)
    d = best_scales(x)
    return np.concatenate([f16_bytes(d), join_halves(_codes(x, d))], axis=1)


def quantize_iq4_xs(x: np.ndarray) -> np.ndarray:
    """f32 [n, 256] -> IQ4_XS blocks u8 [n, 136]: a 6-bit scale per 32 weights times d."""
    x = np.asarray(x, np.float32)
    n = x.shape[0]
    s = best_scales(x.reshape(n * 8, 32)).reshape(n, 8)
    max_scale = s[np.arange(n), np.abs(s).argmax(axis=1)]
    d = -max_scale / np.float32(32)               # -0.0 for an all-zero block, as in C
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    ls = np.clip(np.rint(inv[:, None] * s), -32, 31).astype(np.int32)
    dl = (d[:, None] * ls.astype(np.float32)).reshape(n * 8)
    codes = _codes(x.reshape(n * 8, 32), dl).reshape(n, 8, 32)
    ls = (ls + 32).astype(np.uint16)
    low = (ls & 15).astype(np.uint8)
    high = ((ls >> 4) << np.arange(0, 16, 2, dtype=np.uint16)).sum(axis=1, dtype=np.uint16)
    return np.concatenate([
        f16_bytes(d),
        high.astype("<u2").reshape(n, 1).view(np.uint8),
        low[:, 0::2] | low[:, 1::2] << 4,
        join_halves(codes).reshape(n, 128),
    ], axis=1)
