"""Encode metadata values for a GGUF file, choosing each value's type from the Python value.

bool -> BOOL; a Python int -> UINT32 when it fits (the type llama.cpp reads its integer
hyperparameters as), else INT32, UINT64 or INT64; a Python float -> FLOAT32 (likewise);
str or bytes -> STRING; numpy scalars and 1-D arrays keep their own dtype; a list is an
array of one item type chosen the same way. A tuple ``(value, "UINT8")`` names the type
(for a list, the item type), which is how an empty array or a FLOAT64 is written.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from .gguf_format import SCALAR_DTYPES, GGUFError, ValueType, value_type

_NP_KIND = {np.dtype(d).newbyteorder("<"): t for t, d in SCALAR_DTYPES.items()
            if t != ValueType.BOOL}
_INT_ORDER = (ValueType.UINT32, ValueType.INT32, ValueType.UINT64, ValueType.INT64)


def _int_type(values, what: str) -> ValueType:
    lo, hi = min(values), max(values)
    for t in _INT_ORDER:
        info = np.iinfo(SCALAR_DTYPES[t])
        if info.min <= lo and hi <= info.max:
            return t
    raise GGUFError(f"{what}: integer {hi if hi > 0 else lo} does not fit in 64 bits")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _numpy_type(dtype: np.dtype, what: str) -> ValueType:
    if dtype == np.bool_:
        return ValueType.BOOL
    t = _NP_KIND.get(dtype.newbyteorder("<"))
    if t is None:
        raise GGUFError(f"{what}: numpy dtype {dtype} has no GGUF value type")
    return t


def _infer(value, what: str) -> ValueType:
    """The type of a scalar value given without one."""
    if isinstance(value, (bool, np.bool_)):
        return ValueType.BOOL
    if isinstance(value, np.generic):
        return _numpy_type(value.dtype, what)
    if isinstance(value, int):
        return _int_type([value], what)
    if isinstance(value, float):
        return ValueType.FLOAT32
    if isinstance(value, (str, bytes)):
        return ValueType.STRING
    raise GGUFError(f"{what}: cannot store a {type(value).__name__} in GGUF metadata")


def _infer_items(items: list, what: str) -> ValueType:
    """The item type of a list: one type for all, ints widened to fit every item."""
    if not items:
        raise GGUFError(f"{what}: an empty array needs its item type, e.g. ([], 'UINT32')")
    if any(isinstance(v, (list, tuple, np.ndarray)) for v in items):
        raise GGUFError(f"{what}: nested arrays are not supported")
    if all(_is_int(v) for v in items):
        if all(isinstance(v, np.generic) for v in items) and len({v.dtype for v in items}) == 1:
            return _numpy_type(items[0].dtype, what)
        return _int_type([int(v) for v in items], what)
    if all(_is_int(v) or isinstance(v, (float, np.floating)) for v in items):
        if all(isinstance(v, np.float64) and type(v) is not float for v in items):
            return ValueType.FLOAT64
        return ValueType.FLOAT32
    kinds = {_infer(v, what) for v in items}
    if len(kinds) > 1:
        raise GGUFError(f"{what}: array items mix types ({', '.join(k.name for k in kinds)})")
    return kinds.pop()


def _string(value, what: str) -> bytes:
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        # surrogate escapes are bytes a read string could not decode: write them back
        try:
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as e:
            raise GGUFError(f"{what}: cannot encode as UTF-8 ({e.reason})") from None
    else:
        raise GGUFError(f"{what}: expected a str for a STRING value, got "
                        f"{type(value).__name__}")
    return struct.pack("<Q", len(raw)) + raw


def _numbers(values: list, t: ValueType, what: str) -> bytes:
    """Pack numbers as type ``t``, refusing any that the type cannot hold."""
    dtype = SCALAR_DTYPES[t]
    if any(isinstance(v, (str, bytes)) for v in values):
        raise GGUFError(f"{what}: {t.name} values must be numbers, not strings")
    if t == ValueType.BOOL:
        if any(not isinstance(v, (bool, np.bool_)) and v not in (0, 1) for v in values):
            raise GGUFError(f"{what}: BOOL values must be True/False (or 0/1)")
        return np.asarray([bool(v) for v in values], dtype=dtype).tobytes()
    if t in (ValueType.FLOAT32, ValueType.FLOAT64):
        if any(isinstance(v, (bool, np.bool_)) for v in values):
            raise GGUFError(f"{what}: {t.name} values must be numbers, not bools")
        try:
            f = [float(v) for v in values]
        except (TypeError, ValueError):
            raise GGUFError(f"{what}: {t.name} values must be numbers") from None
        with np.errstate(over="ignore"):
            arr = np.asarray(f, dtype=dtype)
        bad = [x for x, y in zip(f, arr.tolist()) if math.isfinite(x) and not math.isfinite(y)]
        if bad:
            raise GGUFError(f"{what}: {bad[0]} overflows {t.name}")
        return arr.tobytes()
    if not all(_is_int(v) for v in values):
        raise GGUFError(f"{what}: {t.name} values must be integers")
    info = np.iinfo(dtype)
    bad = [int(v) for v in values if not info.min <= int(v) <= info.max]
    if bad:
        raise GGUFError(f"{what}: {bad[0]} does not fit in {t.name}")
    return np.asarray([int(v) for v in values], dtype=dtype).tobytes()


def _encode_as(value, t: ValueType, what: str) -> bytes:
    """The encoding of ``value`` (a scalar, or an array of items of type ``t``)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise GGUFError(f"{what}: array values must be 1-D, got shape {value.shape}")
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in value):
            raise GGUFError(f"{what}: nested arrays are not supported")
        head = struct.pack("<IIQ", ValueType.ARRAY, t, len(value))
        if t == ValueType.STRING:
            return head + b"".join(_string(v, f"{what}[{i}]") for i, v in enumerate(value))
        return head + _numbers(list(value), t, what)
    head = struct.pack("<I", t)
    if t == ValueType.STRING:
        return head + _string(value, what)
    return head + _numbers([value], t, what)


def encode_value(value, what: str) -> bytes:
    """A metadata value's type tag and bytes; ``what`` names it in errors."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise GGUFError(f"{what}: a tuple must be a (value, type) pair, e.g. (1, 'UINT8')")
        try:
            t = value_type(value[1])
        except GGUFError as e:
            raise GGUFError(f"{what}: {e}") from None
        if t == ValueType.ARRAY:
            raise GGUFError(f"{what}: name an array's item type, not ARRAY")
        return _encode_as(value[0], t, what)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "US":
            return _encode_as(value.tolist(), ValueType.STRING, what)
        return _encode_as(value, _numpy_type(value.dtype, what), what)
    if isinstance(value, list):
        return _encode_as(value, _infer_items(value, what), what)
    return _encode_as(value, _infer(value, what), what)


def encode_key(key: str) -> bytes:
    if not isinstance(key, str) or not key:
        raise GGUFError(f"metadata key {key!r} must be a non-empty string")
    return _string(key, f"key {key!r}")


__all__ = ["encode_value", "encode_key"]
