"""RLX element dtypes: names, sizes, numpy mapping and the promotion table."""
from __future__ import annotations

import enum
import math

import ml_dtypes
import numpy as np


class DType(enum.Enum):
    """An RLX dtype. ``value`` is RLX's serde name (``"F32"``); ``str()`` its display name."""

    F32 = "F32"
    F16 = "F16"
    BF16 = "BF16"
    F64 = "F64"
    I8 = "I8"
    I16 = "I16"
    I32 = "I32"
    I64 = "I64"
    U8 = "U8"
    U32 = "U32"
    BOOL = "Bool"
    C64 = "C64"
    C128 = "C128"

    def __str__(self) -> str:
        return _DISPLAY[self]

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    @property
    def display(self) -> str:
        return _DISPLAY[self]

    @property
    def size_bytes(self) -> int:
        return _SIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)

    @property
    def is_complex(self) -> bool:
        return self in (DType.C64, DType.C128)

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def np(self) -> np.dtype:
        """The numpy dtype that stores this dtype (bf16 through ml_dtypes)."""
        return _NP[self]

    @property
    def promotion_rank(self) -> int:
        return _RANK[self]

    def promote(self, other: "DType") -> "DType":
        """RLX's binary promotion: mixed int+float widens to a float that covers both."""
        if self is other:
            return self
        if {self, other} == {DType.F16, DType.BF16}:
            return DType.F32
        if self.is_int and other.is_float:
            return _int_float(self, other)
        if other.is_int and self.is_float:
            return _int_float(other, self)
        return self if self.promotion_rank >= other.promotion_rank else other

    @staticmethod
    def parse(text: str) -> "DType":
        """Parse a display name (``f32``) or serde name (``F32``); ValueError otherwise."""
        key = text.strip()
        if key in _BY_DISPLAY:
            return _BY_DISPLAY[key]
        if key in _BY_SERDE:
            return _BY_SERDE[key]
        raise ValueError(
            f"unknown dtype `{text}`; expected one of {', '.join(_BY_DISPLAY)}"
        )

    @staticmethod
    def of(array_or_dtype) -> "DType":
        """The RLX dtype of a numpy array or numpy dtype; TypeError when it has none."""
        dt = np.dtype(getattr(array_or_dtype, "dtype", array_or_dtype))
        for d, nd in _NP.items():
            if nd == dt:
                return d
        raise TypeError(f"numpy dtype {dt} has no RLX equivalent")


def _int_float(int_dt: DType, float_dt: DType) -> DType:
    if float_dt is DType.F64 or int_dt is DType.I64:
        return DType.F64
    return DType.F32


_DISPLAY = {
    DType.F32: "f32", DType.F16: "f16", DType.BF16: "bf16", DType.F64: "f64",
    DType.I8: "i8", DType.I16: "i16", DType.I32: "i32", DType.I64: "i64",
    DType.U8: "u8", DType.U32: "u32", DType.BOOL: "bool", DType.C64: "c64",
    DType.C128: "c128",
}
_SIZE = {
    DType.BOOL: 1, DType.I8: 1, DType.U8: 1, DType.F16: 2, DType.BF16: 2, DType.I16: 2,
    DType.F32: 4, DType.I32: 4, DType.U32: 4, DType.F64: 8, DType.I64: 8, DType.C64: 8,
    DType.C128: 16,
}
_RANK = {
    DType.BOOL: 0, DType.U8: 1, DType.I8: 1, DType.I16: 2, DType.BF16: 2, DType.F16: 3,
    DType.U32: 4, DType.I32: 4, DType.I64: 5, DType.F32: 6, DType.F64: 7, DType.C64: 8,
    DType.C128: 9,
}
_NP = {
    DType.F32: np.dtype(np.float32), DType.F16: np.dtype(np.float16),
    DType.BF16: np.dtype(ml_dtypes.bfloat16), DType.F64: np.dtype(np.float64),
    DType.I8: np.dtype(np.int8), DType.I16: np.dtype(np.int16),
    DType.I32: np.dtype(np.int32), DType.I64: np.dtype(np.int64),
    DType.U8: np.dtype(np.uint8), DType.U32: np.dtype(np.uint32),
    DType.BOOL: np.dtype(np.bool_), DType.C64: np.dtype(np.complex64),
    DType.C128: np.dtype(np.complex128),
}
_BY_DISPLAY = {v: k for k, v in _DISPLAY.items()}
_BY_SERDE = {d.value: d for d in DType}

ALL_DTYPES = tuple(DType)
FLOAT_DTYPES = tuple(d for d in DType if d.is_float)
INT_DTYPES = tuple(d for d in DType if d.is_int)

_INT_RANGE = {
    DType.I8: (-(2**7), 2**7 - 1), DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1), DType.I64: (-(2**63), 2**63 - 1),
    DType.U8: (0, 2**8 - 1), DType.U32: (0, 2**32 - 1),
}


def int_range(dtype: DType) -> tuple[int, int]:
    """Inclusive (min, max) of an integer dtype."""
    return _INT_RANGE[dtype]


def scalar_constant_bytes(value: float, dtype: DType) -> bytes:
    """Little-endian bytes of a scalar literal, as RLX's ``scalar_constant_bytes``.

    Raises ValueError when the value is not finite or integral for an integer dtype,
    or out of its range. f16/bf16/complex literals are built via an f32 constant + Cast
    in RLX; here they are encoded directly (the value is rounded to the dtype).
    """
    if dtype.is_int:
        if not math.isfinite(float(value)):
            raise ValueError(f"constant value {value} is not finite for dtype {dtype}")
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"constant value {value} must be integral for dtype {dtype}")
        lo, hi = _INT_RANGE[dtype]
        iv = int(value)
        if not lo <= iv <= hi:
            raise ValueError(
                f"constant value {value} is out of range for dtype {dtype} [{lo}, {hi}]"
            )
        return np.array(iv, dtype=dtype.np).tobytes()
    if dtype is DType.BOOL:
        return bytes([1 if value else 0])
    return np.array(value, dtype=dtype.np).tobytes()


def cast_checked(values, dtype: DType) -> np.ndarray:
    """``values`` (array-like) as ``dtype``, refusing any value the dtype cannot hold.

    Integer targets need integral values in range; bool needs 0/1; an integer source to a
    float target must be exact; a float source to a narrower float may round but must not
    overflow to infinity. ValueError names the first offending value.
    """
    src = np.asarray(values)
    if src.dtype == dtype.np:
        return src
    if src.dtype.kind not in "biufc" and src.dtype != ml_dtypes.bfloat16:
        raise ValueError(f"values of numpy dtype {src.dtype} are not numbers")
    if src.dtype.kind == "c" and not dtype.is_complex:
        raise ValueError(f"complex values cannot become {dtype}")
    wide = src.astype(np.complex128 if src.dtype.kind == "c" else np.float64)
    if dtype.is_bool:
        bad = (wide != 0) & (wide != 1)
        why = "is not 0/1 (bool)"
    elif dtype.is_int:
        lo, hi = int_range(dtype)
        bad = ~np.isfinite(wide) | (wide != np.round(wide)) | (wide < lo) | (wide > hi)
        why = f"is not an integer in [{lo}, {hi}] ({dtype})"
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            out = src.astype(dtype.np)
        if src.dtype.kind in "biu":
            bad = out.astype(np.float64) != wide
            why = f"is not exact in {dtype}"
        else:
            bad = np.isfinite(wide) & ~np.isfinite(out)
            why = f"overflows {dtype}"
        if not bad.any():
            return out
    if bad.any():
        first = src.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
        raise ValueError(f"value {first.item()!r} {why}")
    return src.astype(dtype.np)
