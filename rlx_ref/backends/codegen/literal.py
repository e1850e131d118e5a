"""Constants in generated source: one renderer per target language.

Every Python value that a renderer writes into kernel source (a payload bound, a
reduction's identity, a dtype's extreme, a fill) goes through ``py_literal`` (Numba
Python, CPU and CUDA) or ``c_literal`` (OpenCL C). The text evaluates to exactly the value
converted to the dtype, for every value of every dtype: ±inf, NaN (numpy's quiet NaN with
the value's sign), -0.0, subnormals, the largest finite floats and the integer extremes.
``repr`` would write ``inf`` (an unbound name); a C compiler reads ``-9223372036854775808L``
as the negation of a constant too large for ``long``, rounds an inexact decimal as it
likes and gives ``NAN`` the payload it likes. 16-bit floats are held in a wider shadow
inside kernels (f64 in Numba kernels, ``float`` in OpenCL C), so their literals are the
rounded value in that type. Numba literals need ``math`` and ``np`` in the module (every
kernel header imports them).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...ir.dtype import DType


class LiteralError(ValueError):
    """The value has no exact literal of the dtype (a non-integral or out-of-range int)."""


_C_INT = {"int8": "char", "int16": "short", "int32": "int", "int64": "long",
          "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong"}
_SHADOWED = ("float16", "bfloat16")     # held in a wider float inside kernels
_I64_MIN = -(2 ** 63)


def _dtype(dtype) -> np.dtype:
    """The numpy dtype of a DType or anything ``np.dtype`` takes."""
    if isinstance(dtype, DType):
        if dtype.is_complex:
            raise LiteralError(f"no literal of the complex dtype {dtype}")
        return dtype.np
    return np.dtype(dtype)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"


def exact_value(value, dtype):
    """``value`` as a Python bool, int or float holding exactly the dtype's value."""
    dt = _dtype(dtype)
    if dt.kind == "b":
        if value not in (0, 1):       # NaN is not in it either
            raise LiteralError(f"{value!r} is not a bool literal (expected True/False or 0/1)")
        return bool(value)
    if dt.kind in "iu":
        return _exact_int(value, dt)
    if _is_float(dt):
        try:
            wide = float(value)
        except OverflowError:                 # an int beyond f64: it rounds to ±inf
            wide = math.inf if value > 0 else -math.inf
        with np.errstate(over="ignore"):      # a finite value beyond the range rounds to ±inf
            return float(dt.type(wide))
    raise LiteralError(f"no literal of dtype {dt}")


def _exact_int(value, dt: np.dtype) -> int:
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or value != math.floor(value):
            raise LiteralError(f"{float(value)!r} is not an integer, so it has no {dt} "
                               f"literal (round it, or saturate it to the dtype's range, "
                               f"before rendering)")
    v = int(value)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise LiteralError(f"{v} is outside the range of {dt} ({info.min}..{info.max})")
    return v


# ── Numba (Python) ─────────────────────────────────────────────────────────

def py_literal(value, dtype) -> str:
    """A Numba/Python expression whose value is exactly ``value`` as a ``dtype`` scalar."""
    dt = _dtype(dtype)
    v = exact_value(value, dt)
    if dt.kind == "b":
        return "True" if v else "False"
    if dt.kind in "iu":
        body = "-9223372036854775807 - 1" if v == _I64_MIN else str(v)
        return f"np.{dt.name}({body})"
    ctor = "np.float64" if dt.name in _SHADOWED else f"np.{dt.name}"
    return f"{ctor}({py_float(v)})"


def py_float(v: float) -> str:
    """A bare Python float literal of the f64 ``v`` (Numba types it f64), for arithmetic
    where a ``np.float64(...)`` call would only add noise."""
    v = float(v)
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    if math.isnan(v):       # Numba folds -math.nan to a positive NaN; copysign keeps it
        return "math.copysign(math.nan, -1.0)" if sign else "math.nan"
    if math.isinf(v):
        return sign + "math.inf"
    return repr(v)          # Python parses the shortest round-trip digits exactly


# ── OpenCL C ────────────────────────────────────────────────────────────────

def c_type(dtype) -> str:
    """The C type a literal of ``dtype`` has (16-bit floats: their ``float`` shadow)."""
    dt = _dtype(dtype)
    if dt.kind == "b":
        return "uchar"
    if dt.kind in "iu":
        return _C_INT[dt.name]
    return "double" if dt.name == "float64" else "float"


def c_literal(value, dtype) -> str:
    """An OpenCL C expression whose value is exactly ``value`` in ``dtype`` (parenthesised)."""
    dt = _dtype(dtype)
    v = exact_value(value, dt)
    ctype = c_type(dt)
    if dt.kind == "b":
        return f"((uchar){int(v)})"
    if dt.kind in "iu":
        return _c_int(v, ctype)
    return _c_float(v, ctype)


def _c_int(v: int, ctype: str) -> str:
    if ctype == "long":
        # -9223372036854775808L is unary minus on a constant too large for long
        return "(-9223372036854775807L - 1L)" if v == _I64_MIN else f"({v}L)"
    if ctype == "ulong":
        return f"({v}UL)"
    suffix = "U" if ctype.startswith("u") else "L"
    return f"(({ctype}){v}{suffix})"


def _c_float(v: float, ctype: str) -> str:
    neg = math.copysign(1.0, v) < 0
    if math.isnan(v):       # the NAN macro's payload is the compiler's (PoCL: all ones)
        if ctype == "float":
            return f"as_float({int(np.float32(v).view(np.uint32)):#010x}U)"
        return f"as_double({int(np.float64(v).view(np.uint64)):#018x}UL)"
    if math.isinf(v):
        text = "INFINITY" if ctype == "float" else "(double)INFINITY"
        return f"(-{text})" if neg else f"({text})"
    suffix = "f" if ctype == "float" else ""
    return f"({_c_float_digits(v)}{suffix})"


def _c_float_digits(v: float) -> str:
    """Decimal digits when they are the value exactly, else a C99 hex float (always exact)."""
    text = repr(v)
    if Fraction(text) == Fraction(v):
        return text if ("." in text or "e" in text) else text + ".0"
    mantissa, exp = v.hex().split("p")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exp}"
