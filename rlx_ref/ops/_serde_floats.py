"""Float layout as serde_json prints it (Rust's ryu): shortest round-trip digits."""
from __future__ import annotations

import math

import numpy as np


def _ryu(sci: str, hi: int, lo: int) -> str:
    """Lay out shortest digits as Rust's ryu does (serde_json's printer): plain notation
    for decimal exponents in (lo, hi], scientific otherwise (f32: 13/-6, f64: 16/-5)."""
    sign = "-" if sci.startswith("-") else ""
    mant, exp = sci.lstrip("-").split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    if digits == "0":
        return sign + "0.0"
    kk = int(exp) + 1                       # value = 0.digits × 10^kk
    n = len(digits)
    if n <= kk <= hi:
        body = digits + "0" * (kk - n) + ".0"
    elif 0 < kk <= hi:
        body = digits[:kk] + "." + digits[kk:]
    elif lo < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    elif n == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def format_f32(v: float) -> str:
    """Shortest decimal that round-trips through f32, laid out as serde_json prints it."""
    if math.isnan(v) or math.isinf(v):
        return "null"
    return _ryu(np.format_float_scientific(np.float32(v), unique=True, trim="0"), 13, -6)


def format_f64(v: float) -> str:
    """Shortest round-trip f64 decimal, laid out as serde_json prints it (``1.0``, ``1e-7``)."""
    if math.isnan(v) or math.isinf(v):
        return "null"
    return _ryu(np.format_float_scientific(np.float64(v), unique=True, trim="0"), 16, -5)
