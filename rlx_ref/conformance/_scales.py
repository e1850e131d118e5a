"""Input-derived signal scales of accuracy contracts (``accuracy.bind``)."""
from __future__ import annotations

import numpy as np


def max_abs_broadcast(values) -> np.ndarray:
    """max |finite operand| per output element (operands broadcast), or the overall max.
    Infinite operands count as 0: the NaN/inf rule and the ULPs judge those elements."""
    mags = [np.abs(v.astype(np.complex128 if v.dtype.kind == "c" else np.float64))
            for v in values if v is not None and v.dtype.kind in "fcV"]
    mags = [np.where(np.isfinite(m), m, 0.0) for m in mags]
    if not mags:
        return np.zeros(())
    try:
        return np.maximum.reduce(np.broadcast_arrays(*mags)) if len(mags) > 1 else mags[0]
    except ValueError:
        return np.asarray(max((m.max() if m.size else 0.0) for m in mags))


def solve_scale(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """κ∞(A)·max|x| per matrix of A [N, N] or [B, N, N], shaped to broadcast over x."""
    a = np.asarray(a, np.float64)
    if a.size == 0 or x.size == 0:
        return np.zeros(())
    batched = a.ndim == 3
    mats = a if batched else a[None]
    xs = x if batched else x[None]
    with np.errstate(all="ignore"):
        cond = np.array([np.linalg.cond(m, np.inf) for m in mats])
        xmax = np.abs(xs).reshape(len(mats), -1).max(axis=1)
    s = cond * xmax
    return s.reshape((-1,) + (1,) * (x.ndim - 1)) if batched else np.asarray(s[0])
