"""Host-side geometry shared by the reduction, normalization and scan lowerings.

Every kernel of these families sees its input as a C-contiguous ``[outer, K, inner]``
block: K the reduced (scanned, normalized) extent, ``inner`` the run after it. A "row" is
one (outer, inner) pair: its K elements sit ``inner`` apart.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..layout import reduce_layout, split3  # noqa: F401 - the kernels' geometry
from .device import BITS16, device_dtype

_WIDEN = {DType.F16: "_h2f", DType.BF16: "_bf2f"}
_NARROW = {DType.F16: "_f2h", DType.BF16: "_f2bf"}
NP_NAME = {np.dtype(t): f"np.{np.dtype(t).name}" for t in (
    np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32)}
NP_NAME[np.dtype(np.bool_)] = "np.bool_"


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
