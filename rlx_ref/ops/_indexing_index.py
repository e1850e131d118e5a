"""Index tensors for the indexing family: decode, range-check, never clamp or wrap silently.

RLX passes indices as f32 tensors holding integral values (its I/O boundary is f32);
integer index tensors are accepted too. A fractional, non-finite or out-of-range index
is an OpError naming the op, the index's position, the axis and the valid range.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from .opdef import OpError, want


def check_index_dtype(dt: DType, op: str, cid: str, what: str = "indices") -> None:
    """Indices are a float (f32-encoded integers) or an integer tensor."""
    want(dt.is_float or dt.is_int,
         f"({cid}) {op} {what} must be f32-encoded integers or an integer tensor, got {dt}")


def _where(pos: tuple, what: str) -> str:
    return f"{what}[{', '.join(str(int(i)) for i in pos)}]" if pos else what


def _first(bad: np.ndarray) -> tuple:
    return tuple(np.argwhere(bad)[0]) if bad.ndim else ()


def decode(idx, op: str, cid: str, what: str = "indices") -> np.ndarray:
    """The integer values of an index tensor as int64; OpError if one is not an integer."""
    a = np.asarray(idx)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "b" or a.dtype.kind == "c":
        raise OpError(f"({cid}) {op} {what} must be numbers, got {a.dtype}")
    f = a.astype(np.float64)
    bad = ~np.isfinite(f) | (f != np.round(f))
    if bad.any():
        pos = _first(bad)
        raise OpError(f"({cid}) {op} index {float(f[pos])} at {_where(pos, what)} is not an "
                      f"integer (indices are integral values encoded as {a.dtype})")
    # values past ±2^62 are out of range for any axis; keep them out of range after the cast
    return np.clip(f, -2.0**62, 2.0**62).astype(np.int64)


def in_range(idx: np.ndarray, size: int, axis: int, op: str, cid: str,
             negative_ok: bool, what: str = "indices", pos_suffix: tuple = ()) -> np.ndarray:
    """``idx`` checked against an axis of ``size``; negatives count from the end if allowed."""
    lo = -size if negative_ok else 0
    bad = (idx < lo) | (idx >= size)
    if bad.any():
        pos = _first(bad) + pos_suffix
        v = int(idx[_first(bad)])
        if size == 0:
            expect = "the axis is empty, so no index is valid"
        elif negative_ok:
            expect = f"expected {-size}..{size - 1}; negatives count from the end"
        else:
            expect = f"expected 0..{size - 1}; {op} does not wrap negative indices"
        raise OpError(f"({cid}) {op} index {v} at {_where(pos, what)} is out of range for "
                      f"axis {axis} of size {size} ({expect})")
    return np.where(idx < 0, idx + size, idx)
