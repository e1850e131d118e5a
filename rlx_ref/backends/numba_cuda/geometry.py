"""Host-side geometry shared by the reduction, normalization and scan lowerings.

Every kernel of these families sees its input as a C-contiguous ``[outer, K, inner]``
block: K the reduced (scanned, normalized) extent, ``inner`` the run after it. A "row" is
one (outer, inner) pair: its K elements sit ``inner`` apart.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from .device import BITS16, device_dtype

_WIDEN = {DType.F16: "_h2f", DType.BF16: "_bf2f"}
_NARROW = {DType.F16: "_f2h", DType.BF16: "_f2bf"}
NP_NAME = {np.dtype(t): f"np.{np.dtype(t).name}" for t in (
    np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32)}
NP_NAME[np.dtype(np.bool_)] = "np.bool_"


def split3(dims, lo: int, hi: int) -> tuple[int, int, int]:
    """(outer, K, inner) for the axes ``lo..hi-1`` of ``dims`` (a contiguous range)."""
    dims = [int(d) for d in dims]
    return math.prod(dims[:lo]), math.prod(dims[lo:hi]), math.prod(dims[hi:])


def reduce_layout(dims, axes) -> tuple[tuple | None, tuple[int, int, int]]:
    """(permutation or None, (outer, K, inner)) of ``dims`` reduced over ``axes``.

    Size-1 axes are dropped first; adjacent reduced axes are read in place, otherwise the
    permutation (kept axes, then reduced axes) is applied by one copy first.
    """
    dims = [int(d) for d in dims]
    red = set(axes)
    live = [i for i, d in enumerate(dims) if d != 1]
    pos = [j for j, i in enumerate(live) if i in red]
    if not pos:
        return None, (math.prod(dims), 1, 1)
    if pos[-1] - pos[0] + 1 == len(pos):
        return None, split3(dims, live[pos[0]], live[pos[-1]] + 1)
    kept = [i for i in range(len(dims)) if i not in red]
    perm = tuple(kept + sorted(red))
    return perm, (math.prod(dims[i] for i in kept), math.prod(dims[i] for i in red), 1)


def read_expr(dt: DType, value: str) -> str:
    """``value`` (an element of a ``dt`` device array) as a number to compute with."""
    if dt in _WIDEN:
        return f"{_WIDEN[dt]}({value})"
    if dt.is_float:
        return f"np.float64({value})"
    return f"np.int64({value})"


def store_expr(dt: DType, value: str) -> str:
    """``value`` converted for storing into a ``dt`` device array (16-bit: rounded once)."""
    if dt in _NARROW:
        return f"{_NARROW[dt]}({value})"
    return f"{NP_NAME[device_dtype(dt)]}({value})"


def acc_np(dt: DType) -> str:
    """The accumulator's numpy type: f64 for floats, i64 for integers."""
    return "np.float64" if dt.is_float or dt in BITS16 else "np.int64"
