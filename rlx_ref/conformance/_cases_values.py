"""Value tables for generated cases: special values per dtype, domain edges, tiling lengths.

Every value is a literal or an ``finfo`` constant cast to the dtype, never the result of a
libm call, so the bytes (and the case ids) are the same on every platform.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.dtype import FLOAT_DTYPES, DType

# Lengths along the kernel's axis: tiny, odd, prime, a 64/256 block ± 1, several blocks.
LENGTHS = (1, 2, 3, 7, 31, 63, 64, 65, 127, 255, 256, 257, 1025)
SPECIAL_CLASSES = ("±0", "subnormal", "inf", "nan", "extremes")
FLOATS = FLOAT_DTYPES                     # f32, f16, bf16, f64
ORDINARY = (1.0, -2.5)                    # mixed in so no output is trivially constant


def length_tags(n: int) -> tuple:
    """Tags of a tiling length: ``len-N`` plus tail / block±1 / multi-workgroup."""
    tags = ["tiling", f"len-{n}"]
    if n % 32:
        tags.append("tail")
    if n in (63, 65, 127, 129, 255, 257):
        tags.append("block±1")
    if n > 256:
        tags.append("multi-workgroup")
    return tuple(tags)


def special_values(dt: DType, cls: str) -> np.ndarray:
    """The values of one special class in ``dt`` (ordinary values appended)."""
    fi = ml_dtypes.finfo(dt.np)
    big, tiny, sub = float(fi.max), float(fi.tiny), float(fi.smallest_subnormal)
    table = {
        "±0": [0.0, -0.0],
        "subnormal": [sub, -sub, tiny / 2, -tiny / 2, tiny - sub, -(tiny - sub), tiny],
        "inf": [np.inf, -np.inf],
        "nan": [np.nan, -np.nan],
        "extremes": [big, -big, tiny, -tiny, 1.0 + float(fi.eps), big / 2],
    }
    return np.array(table[cls] + list(ORDINARY), np.float64).astype(dt.np)


def int_extremes(dt: DType) -> np.ndarray:
    """min, max, and their neighbours in an integer dtype."""
    info = np.iinfo(dt.np)
    vals = [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]
    return np.array([v for v in vals if info.min <= v <= info.max], dt.np)


def as_dtype(values, dt: DType) -> np.ndarray:
    """Literal float64 values rounded once to ``dt``."""
    with np.errstate(over="ignore"):      # values beyond a narrow dtype become ±inf
        return np.asarray(values, np.float64).astype(dt.np)


# ── domain edges ───────────────────────────────────────────────────────────
_PI_2 = 1.5707963267948966
_OVERFLOW = [-100.0, -20.0, 20.0, 100.0, 88.8, -88.8]

# Activation -> inputs at the edges of its domain (log at 0, sqrt of -0, recip of ±0, ...)
ACTIVATION_EDGES = {
    "Log": [0.0, -0.0, -1.0, 1.0, 5e-324, 1e-45, np.inf, 2.0],
    "Sqrt": [-0.0, 0.0, -1e-45, -1.0, np.inf, 5e-324, 4.0],
    "Rsqrt": [0.0, -0.0, np.inf, 1e-45, -1.0, 4.0],
    "Recip": [0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, 3.4e38, 2.0],
    "Exp": [11.08, 11.1, -9.7, -17.4, 88.72, 88.73, -87.33, -103.97, -104.0, 709.78, -745.2],
    "Softplus": _OVERFLOW + [1e4, -1e4],
    "LogSigmoid": _OVERFLOW + [1e4, -1e4],
    "Sigmoid": _OVERFLOW,
    "Silu": _OVERFLOW,
    "Mish": _OVERFLOW,
    "Gelu": _OVERFLOW + [-5.0, -6.0],
    "GeluApprox": _OVERFLOW + [-5.0, -6.0],
    "Tanh": [-20.0, 20.0, 1e-8, -1e-8, 9.0],
    "Elu": [-0.0, 0.0, -100.0, 1e-8, -1e-8],
    "Erf": [-6.0, 6.0, 1e-30, -1e-30, 0.5],
    "Tan": [_PI_2, -_PI_2, 3.141592653589793, 100.0],
    "Sin": [3.141592653589793, 100.0, 1e4, -1e4],
    "Cos": [_PI_2, 100.0, 1e4, -1e4],
    "Atan": [1e30, -1e30, 1.0, -1.0],
    "Round": [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.49999997],
    "Floor": [-0.0, -0.5, 0.5, -1.0, 1e30, -1e30],
    "Ceil": [-0.0, -0.5, 0.5, -1.0, 1e30, -1e30],
    "Sign": [-0.0, 0.0, 1e-45, -1e-45, np.nan],
    "Relu": [-0.0, 0.0, np.nan, -1e-45],
    "HardSwish": [-3.0, 3.0, -3.0000002, 2.9999998, -0.0],
    "HardSigmoid": [-3.0, 3.0, -3.0000002, 3.0000002],
    "Softsign": [1e30, -1e30, -0.0],
}

# Binary -> (a, b) pairs at the edges of its domain
BINARY_EDGES = {
    "Div": [(0.0, 0.0), (-0.0, 0.0), (1.0, 0.0), (1.0, -0.0), (-1.0, 0.0),
            (np.inf, np.inf), (1.0, np.inf), (1e-45, 3e38), (3e38, 1e-45)],
    "Pow": [(0.0, -1.0), (-0.0, -1.0), (0.0, 0.0), (np.nan, 0.0), (1.0, np.nan),
            (-1.0, np.inf), (-1.0, -np.inf), (-8.0, 0.33333334), (-2.0, 3.0), (-0.0, 3.0),
            (0.5, np.inf), (2.0, -np.inf), (np.inf, -1.0), (-np.inf, 3.0)],
    "Mod": [(1.0, 0.0), (-1.0, -0.0), (np.inf, 1.0), (1.0, np.inf), (-0.0, 1.0),
            (5.5, -2.0), (-5.5, 2.0), (1e30, 3.0)],
    "Atan2": [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (np.inf, np.inf),
              (-np.inf, np.inf), (np.inf, -np.inf), (1.0, 0.0), (-1.0, -0.0)],
    "Max": [(-0.0, 0.0), (0.0, -0.0), (np.nan, 1.0), (1.0, np.nan), (np.nan, np.nan)],
    "Min": [(-0.0, 0.0), (0.0, -0.0), (np.nan, 1.0), (1.0, np.nan), (np.nan, np.nan)],
    "Shl": [(1.0, 64.0), (1.0, 63.0), (-1.0, 1.0), (1.0, -1.0), (2.9, 1.0)],
    "Shr": [(-1.0, 1.0), (-8.0, 64.0), (1.0, -1.0), (-7.9, 1.0)],
    "BitAnd": [(-0.0, 1.0), (2.9, 1.1), (1e19, 1.0), (-1.5, 3.7)],
}

# Compare, Clamp and friends: inputs that differ only in sign of zero or NaN-ness
ZERO_SIGN_PAIRS = [(0.0, -0.0), (-0.0, 0.0), (np.nan, np.nan), (np.nan, 1.0), (1.0, np.nan)]
